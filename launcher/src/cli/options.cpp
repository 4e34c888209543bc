#include "options.hpp"

#include <CLI/CLI.hpp>
#include <array>
#include <optional>
#include <string_view>

#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

// Options that take a value as the next argument (needed to find where the program starts
// when rewriting mpirun's single-dash "-np").
constexpr std::array<std::string_view, 16> kValueOptions = {
    "-n",           "-np",        "--np",           "-H",
    "--host",       "--hostfile", "--machinefile",  "-x",
    "--output-dir", "--timeout",  "--kill-grace",   "--bind-to",
    "--map-by",     "--topology", "--launch-agent", "--control-net"};

bool takes_value(std::string_view arg) {
  for (auto o : kValueOptions) {
    if (arg == o) return true;
  }
  return false;
}

// CLI11 only knows single-letter short options; mpirun users type "-np 3". Rewrite it to
// "--np" in the launcher's own part of the command line (never in the program's arguments).
// A "--" in the launcher's part ends it: what follows is the program, passed in `after`.
std::vector<std::string> rewrite_mpirun_spellings(const std::vector<std::string>& args,
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
    if (a == "-np") {
      out.push_back("--np");
    } else if (a.rfind("-np=", 0) == 0) {
      out.push_back("--np=" + a.substr(4));
    } else {
      out.push_back(a);
    }
    if (takes_value(a) && i + 1 < args.size()) out.push_back(args[++i]);
  }
  for (; i < args.size(); ++i) out.push_back(args[i]);
  return out;
}

struct Cli {
  CLI::App app{"sparkrun: start a parallel job (PMIx server, I/O forwarding, group-wide abort)",
               "sparkrun"};
  std::string np_text, timeout_text, kill_grace_text;
  bool help = false, version = false, print_config = false;
  Options o;

  Cli() {
    app.set_help_flag();   // handled below so that --help works with any other input
    app.prefix_command();  // everything from the program on belongs to the program
    app.add_flag("-h,--help", help, "Print this help and exit");
    app.add_flag("--version", version, "Print the version and exit");
    app.add_flag("--print-config", print_config,
                 "Print every SPARK_/SPARKNET_ variable: name, value, source, doc");
    app.add_option("-n,--np", np_text, "Number of ranks (also -np; default: all slots)");
    app.add_option("-H,--host", o.hosts, "Hosts: host[:slots][,host[:slots]...] (repeatable)")
        ->allow_extra_args(false);
    app.add_option("--hostfile,--machinefile", o.hostfile,
                   "File with one 'host [slots=N]' per line (# comments)");
    app.add_option("-x", o.exports,
                   "Export VAR (from this environment) or set VAR=value for every rank "
                   "(repeatable)")
        ->allow_extra_args(false);
    app.add_flag("--tag-output", o.tag_output, "Prefix each output line with [rank]");
    app.add_flag("--timestamp-output", o.timestamp_output,
                 "Prefix each output line with the time it was forwarded");
    app.add_option("--output-dir", o.output_dir,
                   "Write rank N's stdout/stderr to DIR/rank.N/stdout and stderr");
    app.add_option("--timeout", timeout_text, "Stop the whole job after SECONDS and exit 124");
    app.add_option("--kill-grace", kill_grace_text,
                   "Seconds between SIGTERM and SIGKILL when stopping ranks (default 2)");
    app.add_flag("--oversubscribe", o.oversubscribe,
                 "Allow more ranks than the slots given by --host/--hostfile");
    app.add_flag("-v,--verbose", o.verbose, "Print launch steps and timings on stderr");
    // Multi-host (docs/multihost.md).
    app.add_option("--launch-agent", o.launch_agent,
                   "Command that starts sparkrun on a remote host; {host} is replaced by the "
                   "host name (default: 'ssh -o BatchMode=yes {host}'; inside a SLURM "
                   "allocation: one 'srun --overlap' step per node, docs/slurm.md)");
    app.add_option("--control-net", o.control_net,
                   "Interface or IPv4 CIDR for the launcher-daemon control plane (default: the "
                   "route to each host)");
    app.add_option("--fabric", o.fabric_file,
                   "Pinned fabric map (JSON from `sparkrun fabric --write FILE`): discover the "
                   "map first and refuse to start when it differs, printing both");
    // Binding: the plan is made by the topology part (spark::topo).
    app.add_option(
        "--bind-to", o.bind_to,
        "Bind each rank: fast|core|l3|none (default fast: fastest cores, best L3 first)");
    app.add_option("--map-by", o.map_by,
                   "Place ranks: slot|core|l3 on a node (default slot); node: ranks over hosts");
    app.add_flag("--report-bindings", o.report_bindings,
                 "Print the binding plan as a table on stderr");
    app.add_option("--topology", o.topology,
                   "Plan binding for this hwloc XML machine (docs/binding.md); run here unbound");
  }
};

}  // namespace

std::string help_text() {
  Cli cli;
  return "Usage: sparkrun [options] [--] program [args...]\n"
         "       sparkrun <subcommand> [args...]   (see docs/user-guide.md)\n\n" +
         cli.app.help();
}

ParseResult parse_options(const std::vector<std::string>& args_in) {
  Cli cli;
  std::optional<std::vector<std::string>> after_dashes;
  std::vector<std::string> args = rewrite_mpirun_spellings(args_in, after_dashes);
  // CLI11 wants them reversed for its vector overload.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    cli.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
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
  Options& o = cli.o;
  o.command = cli.app.remaining();
  if (after_dashes) {
    if (!o.command.empty()) throw UsageError("unexpected '" + o.command.front() + "' before --");
    o.command = *after_dashes;
  }
  if (!cli.np_text.empty() || cli.app.count("--np") > 0) {
    o.np = parse_int(cli.np_text, 1, 1 << 20, "-n");
  }
  if (!cli.timeout_text.empty() || cli.app.count("--timeout") > 0) {
    o.timeout_s = parse_seconds(cli.timeout_text, "--timeout");
    if (*o.timeout_s <= 0) throw UsageError("--timeout: must be more than 0 seconds");
  }
  if (!cli.kill_grace_text.empty() || cli.app.count("--kill-grace") > 0) {
    o.kill_grace_s = parse_seconds(cli.kill_grace_text, "--kill-grace");
  }
  for (const auto& h : o.hosts) {
    if (h.empty()) throw UsageError("--host: empty host list");
  }
  if (cli.app.count("--hostfile") > 0 && o.hostfile.empty()) {
    throw UsageError("--hostfile: empty file name");
  }
  if (cli.app.count("--output-dir") > 0 && o.output_dir.empty()) {
    throw UsageError("--output-dir: empty directory name");
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
