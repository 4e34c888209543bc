#include "options.hpp"

#include <CLI/CLI.hpp>
#include <optional>
#include <string_view>

#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

// CLI11 only knows single-letter short options; mpirun users type "-np 3" and "-wdir DIR".
// Rewrite them to "--np" / "--wdir" in the options' part of the command line (never in the
// program's arguments), asking `app` which options take the next argument as their value. A
// "--" in the options' part ends it: what follows is the program, passed in `after`.
constexpr std::string_view kSingleDashLong[] = {"-np", "-wdir"};

std::string double_dashed(const std::string& a) {
  for (std::string_view s : kSingleDashLong) {
    if (a == s) return "-" + a;
    if (a.size() > s.size() && a.compare(0, s.size(), s) == 0 && a[s.size()] == '=') return "-" + a;
  }
  return a;
}

std::vector<std::string> rewrite_mpirun_spellings(const CLI::App& app,
                                                  const std::vector<std::string>& args,
                                                  std::optional<std::vector<std::string>>& after) {
  std::vector<std::string> out;
  out.reserve(args.size());
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      after.emplace(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      return out;
    }
    if (a.empty() || a[0] != '-') break;  // the program starts here
    out.push_back(double_dashed(a));
    const CLI::Option* opt = app.get_option_no_throw(out.back());
    if (opt != nullptr && opt->get_items_expected_max() > 0 && i + 1 < args.size()) {
      out.push_back(args[++i]);
    }
  }
  for (; i < args.size(); ++i) out.push_back(args[i]);
  return out;
}

// One usage text (CLI11's own "Usage: sparkrun [OPTIONS]" knows nothing of the program part).
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: sparkrun [options] [--] program [args...]\n"
           "       sparkrun <subcommand> [args...]\n";
  }
};

struct Cli {
  CLI::App app{"sparkrun: start a parallel job (PMIx server, I/O forwarding, group-wide abort)",
               "sparkrun"};
  bool help = false, version = false, print_config = false;
  std::optional<LaunchOptions> launch;

  Cli() {
    app.formatter(std::make_shared<UsageFormatter>());
    app.set_help_flag();   // handled below so that --help works with any other input
    app.prefix_command();  // everything from the program on belongs to the program
    app.add_flag("-h,--help", help, "Print this help and exit");
    app.add_flag("--version", version, "Print the version and exit");
    app.add_flag("--print-config", print_config,
                 "Print every SPARK_/SPARKNET_ variable: name, value, source, doc");
    launch.emplace(app);
  }
};

}  // namespace

LaunchOptions::LaunchOptions(CLI::App& app, bool pinned_fabric) {
  auto add = [&](CLI::Option* opt) { table_.push_back(opt); };
  add(app.add_option("-n,--np", np_text_, "Number of ranks (also -np; default: all slots)")
          ->type_name("INT"));
  add(app.add_option("-N,--npernode", per_node_text_,
                     "Ranks per host (mpirun's -N; also --map-by ppr:N:node); -n defaults to "
                     "N x hosts")
          ->type_name("INT"));
  add(app.add_option("-H,--host", o_.hosts, "Hosts: host[:slots][,host[:slots]...] (repeatable)")
          ->allow_extra_args(false));
  add(app.add_option("--hostfile,--machinefile", o_.hostfile,
                     "File with one 'host [slots=N]' or 'host:N' per line (# comments)")
          ->type_name("FILE"));
  add(app.add_option("-x", o_.exports,
                     "Send VAR (from this environment), VAR=value, or every variable matching "
                     "a pattern ('NCCL_*') to every rank on every host (repeatable)")
          ->allow_extra_args(false));
  add(app.add_flag("--env-all", o_.env_all,
                   "Send the whole environment to every rank on every host, less the host's own "
                   "variables (HOSTNAME, PWD, SSH_*, TMPDIR, SLURM_*, ...; docs/launcher.md). "
                   "Without it: SPARK_*, SPARKNET_* and -x"));
  add(app.add_option("--wdir", o_.wdir,
                     "Working directory of every rank on every host (also -wdir; default: this "
                     "one; it must exist on each host)")
          ->type_name("DIR"));
  add(app.add_flag("--tag-output", o_.tag_output, "Prefix each output line with [rank]"));
  add(app.add_flag("--timestamp-output", o_.timestamp_output,
                   "Prefix each output line with the time it was forwarded"));
  add(app.add_option("--output-dir", o_.output_dir,
                     "Write rank N's stdout/stderr to DIR/rank.N/stdout and stderr")
          ->type_name("DIR"));
  add(app.add_option("--report-dir", o_.report_dir,
                     "Where a failed job's report goes: every rank's flight recorder "
                     "(flight.json) and, after a timeout, their stacks (stacks.txt) (default: "
                     "report.JOBID in $SPARK_REPORT_DIR or this directory; written only when "
                     "there is something to report; across hosts every host's part is "
                     "gathered here)")
          ->type_name("DIR"));
  add(app.add_option("--metrics-port", o_.metrics_port,
                     "Serve the ranks' counters as OpenMetrics text (Prometheus) on http://"
                     "ADDR:PORT/ while the job runs (ADDR default 127.0.0.1; across hosts: every "
                     "host's ranks, on the launch host)")
          ->type_name("[ADDR:]PORT"));
  add(app.add_option("--timeout", timeout_text_, "Stop the whole job after SECONDS and exit 124")
          ->type_name("SECONDS"));
  add(app.add_option("--kill-grace", kill_grace_text_,
                     "Seconds between SIGTERM and SIGKILL when stopping ranks (default 2)")
          ->type_name("SECONDS"));
  add(app.add_option("--max-restarts", max_restarts_text_,
                     "After a rank fails (non-zero exit, signal, fail-stop abort), start the "
                     "whole job again, up to INT times (default 0); the ranks see "
                     "SPARK_RESTART_COUNT")
          ->type_name("INT"));
  add(app.add_option("--restart-backoff", restart_backoff_text_,
                     "Seconds to wait before each restart (default 1)")
          ->type_name("SECONDS"));
  add(app.add_flag("--signal-group", o_.signal_group,
                   "Forward SIGUSR1/SIGUSR2 to each rank's whole process group (default: to the "
                   "rank's own process, so its children are spared)"));
  add(app.add_flag("--allow-run-as-root", allow_run_as_root_,
                   "Accepted for mpirun habits; sparkrun runs as root without it"));
  add(app.add_flag("--oversubscribe", o_.oversubscribe,
                   "Allow more ranks than the slots given by --host/--hostfile"));
  add(app.add_flag("-v,--verbose", o_.verbose, "Print launch steps and timings on stderr"));
  // Multi-host (docs/multihost.md).
  add(app.add_option("--launch-agent", o_.launch_agent,
                     "Command that starts sparkrun on a remote host; {host} is replaced by the "
                     "host name (default: 'ssh -o BatchMode=yes {host}'; inside a SLURM "
                     "allocation: one 'srun --overlap' step per node, docs/slurm.md)"));
  add(app.add_option("--control-net", o_.control_net,
                     "Interface or IPv4 CIDR for the launcher-daemon control plane (default: "
                     "the route to each host)"));
  if (pinned_fabric) {
    add(app.add_option("--fabric", o_.fabric_file,
                       "Pinned fabric map (JSON from `sparkrun fabric --write FILE`): discover "
                       "the map first and refuse to start when it differs, printing both"));
  }
  // Binding: the plan is made by the topology part (spark::topo).
  add(app.add_option(
      "--bind-to", o_.bind_to,
      "Bind each rank: fast|core|l3|none (default fast: fastest cores, best L3 first)"));
  add(app.add_option("--map-by", o_.map_by,
                     "Place ranks: slot|core|l3 on a node (default slot); node: ranks over "
                     "hosts; ppr:N:node: N ranks per host (as -N)"));
  add(app.add_flag("--report-bindings", o_.report_bindings,
                   "Print the binding plan as a table on stderr"));
  add(app.add_option(
      "--topology", o_.topology,
      "Plan binding for this hwloc XML machine (docs/binding.md); run here unbound"));
  add(app.add_flag("--nccl-env", o_.nccl_env,
                   "Give each rank NCCL_IB_HCA (both PCIe halves of its lanes), NCCL_IB_GID_INDEX "
                   "(its node's RoCE v2 GID) and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME (the "
                   "control interface), unless set (docs/roce.md)"));
}

Options LaunchOptions::finish() {
  auto given = [this](std::string_view name) {
    for (const CLI::Option* opt : table_) {
      if (opt->check_name(std::string(name))) return opt->count() > 0;
    }
    return false;
  };
  Options o = o_;
  if (given("--np")) o.np = parse_int(np_text_, 1, 1 << 20, "-n");
  if (given("--npernode")) o.per_node = parse_int(per_node_text_, 1, 1 << 20, "-N");
  // mpirun's --map-by ppr:N:node is -N N; other ppr objects have no meaning across hosts here.
  if (o.map_by.rfind("ppr:", 0) == 0) {
    const std::string spec = o.map_by.substr(4);
    const size_t colon = spec.find(':');
    if (colon == std::string::npos || spec.substr(colon + 1) != "node") {
      throw UsageError("--map-by " + o.map_by +
                       ": only ppr:N:node is supported (N ranks per host); for cores or L3 "
                       "within a host use --map-by core|l3");
    }
    const int n = parse_int(spec.substr(0, colon), 1, 1 << 20, "--map-by ppr");
    if (o.per_node && *o.per_node != n) {
      throw UsageError("-N " + std::to_string(*o.per_node) + " and --map-by " + o.map_by +
                       " disagree; give one of them");
    }
    o.per_node = n;
    o.map_by.clear();
  }
  if (given("--timeout")) {
    o.timeout_s = parse_seconds(timeout_text_, "--timeout");
    if (*o.timeout_s <= 0) throw UsageError("--timeout: must be more than 0 seconds");
  }
  if (given("--kill-grace")) o.kill_grace_s = parse_seconds(kill_grace_text_, "--kill-grace");
  if (given("--max-restarts"))
    o.max_restarts = parse_int(max_restarts_text_, 0, 1'000'000, "--max-restarts");
  if (given("--restart-backoff"))
    o.restart_backoff_s = parse_seconds(restart_backoff_text_, "--restart-backoff");
  for (const auto& h : o.hosts) {
    if (h.empty()) throw UsageError("--host: empty host list");
  }
  if (given("--hostfile") && o.hostfile.empty()) throw UsageError("--hostfile: empty file name");
  if (given("--wdir") && o.wdir.empty()) throw UsageError("--wdir: empty directory name");
  if (given("--output-dir") && o.output_dir.empty()) {
    throw UsageError("--output-dir: empty directory name");
  }
  if (given("--report-dir") && o.report_dir.empty())
    throw UsageError("--report-dir: empty directory name");
  return o;
}

std::vector<std::string> LaunchOptions::given() const {
  std::vector<std::string> args;
  for (const CLI::Option* opt : table_) {
    const std::string name = opt->get_name();  // "--long", or "-x" when there is no long one
    if (opt->get_items_expected_max() == 0) {
      args.insert(args.end(), opt->count(), name);
      continue;
    }
    for (const std::string& value : opt->results()) {
      args.push_back(name);
      args.push_back(value);
    }
  }
  return args;
}

std::optional<std::vector<std::string>> parse_command_line(CLI::App& app,
                                                           const std::vector<std::string>& args) {
  std::optional<std::vector<std::string>> after_dashes;
  std::vector<std::string> rewritten = rewrite_mpirun_spellings(app, args, after_dashes);
  // CLI11 wants them reversed for its vector overload.
  std::vector<std::string> reversed(rewritten.rbegin(), rewritten.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  return after_dashes;
}

DaemonOptions parse_daemon_options(const std::vector<std::string>& args) {
  CLI::App app{"sparkrun --daemon"};
  app.set_help_flag();
  app.allow_extras();  // refused below, in the daemon's words
  DaemonOptions d;
  std::string connect, node;
  app.add_option("--connect", connect);
  app.add_option("--node", node);
  app.add_option("--job", d.job);
  app.add_option("--host", d.host);
  parse_command_line(app, args);
  if (!app.remaining().empty()) throw UsageError("unknown daemon option " + app.remaining()[0]);
  if (connect.empty() || node.empty() || d.job.empty()) {
    throw UsageError(
        "--connect, --node and --job are required (daemon mode is started by sparkrun itself)");
  }
  const size_t colon = connect.rfind(':');
  if (colon == std::string::npos) throw UsageError("--connect wants ADDR:PORT");
  d.address = connect.substr(0, colon);
  d.port =
      static_cast<std::uint16_t>(parse_int(connect.substr(colon + 1), 1, 65535, "--connect port"));
  d.node = static_cast<std::uint32_t>(parse_int(node, 0, 1 << 20, "--node"));
  return d;
}

std::string help_text() {
  Cli cli;
  return cli.app.help();
}

ParseResult parse_options(const std::vector<std::string>& args) {
  Cli cli;
  const auto after_dashes = parse_command_line(cli.app, args);
  ParseResult r;
  if (cli.help) {
    r.action = Action::kHelp;
    r.help = help_text();
    return r;
  }
  if (cli.version) {
    r.action = Action::kVersion;
    return r;
  }
  Options o = cli.launch->finish();
  o.command = cli.app.remaining();
  if (after_dashes) {
    if (!o.command.empty()) throw UsageError("unexpected '" + o.command.front() + "' before --");
    o.command = *after_dashes;
  }
  if (cli.print_config) {
    r.action = Action::kPrintConfig;
    r.options = std::move(o);
    return r;
  }
  if (o.command.empty()) {
    throw UsageError("no program given (usage: sparkrun [options] [--] program [args...])");
  }
  if (!after_dashes && o.command.front().size() > 1 && o.command.front()[0] == '-') {
    throw UsageError("unknown option '" + o.command.front() + "'");
  }
  if (o.command.front().empty()) throw UsageError("the program name is empty");
  r.options = std::move(o);
  return r;
}

}  // namespace spark::launch
