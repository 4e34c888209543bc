// sparkrun: the command-line front end. Parses options, makes the job plan, and hands this
// machine's part of it to the node runner. Everything here happens before any rank starts,
// so bad input exits 2 with nothing started.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "env_check.hpp"
#include "exit_rules.hpp"
#include "hostfile.hpp"
#include "job_plan.hpp"
#include "lean_handover.hpp"
#include "node_runner.hpp"
#include "options.hpp"
#include "print_config.hpp"
#ifdef SPARK_LAUNCH_HAVE_PMIX
#include "pmix_server.hpp"
#endif
#include "binding.hpp"
#include "fabric_command.hpp"
#include "forwarded_env.hpp"
#include "rank_env.hpp"
#include "remote_launch.hpp"
#include "restart_loop.hpp"
#include "slurm_plan.hpp"
#include "spawn.hpp"
#include "stderr_output.hpp"
#include "subcommands.hpp"
#include "trace_merge.hpp"
#include "usage_error.hpp"

extern char** environ;

namespace spark::launch {
namespace {

std::string this_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

std::string make_job_id() {
  // Unique on this machine and across machines (PMIx namespace, SPARK_JOB_ID).
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "sparkrun.%d.%08x", static_cast<int>(::getpid()), rd());
  return buf;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

RestartPolicy restart_policy(const Options& o) {
  return {o.max_restarts, o.restart_backoff_s};
}

// The ranks' directory: --wdir (relative to ours), else ours. Absolute, so that it means the
// same on every host.
std::string working_dir(const Options& o) {
  std::error_code ec;
  const std::filesystem::path here = std::filesystem::current_path(ec);
  if (ec) {
    if (o.wdir.empty()) return {};  // ours was removed: every host keeps its own
    if (std::filesystem::path(o.wdir).is_relative())
      throw UsageError("--wdir " + o.wdir + ": relative, and sparkrun's own directory is gone (" +
                       ec.message() + "); give an absolute path");
  }
  if (o.wdir.empty()) return here.string();
  return (here / o.wdir).lexically_normal().string();
}

int launch(const Options& o, std::chrono::steady_clock::time_point started,
           const ForwardedEnv& forwarded) {
  // Hosts.
  std::vector<HostSlots> hosts;
  for (const auto& h : o.hosts) {
    auto list = parse_host_list(h);
    hosts.insert(hosts.end(), list.begin(), list.end());
  }
  if (!o.hostfile.empty()) {
    auto list = read_hostfile(o.hostfile);
    hosts.insert(hosts.end(), list.begin(), list.end());
  }
  const std::string hostname = this_hostname();
  PlanInput in;
  in.np = o.np;
  in.per_node = o.per_node;
  in.hosts = hosts;
  in.oversubscribe = o.oversubscribe;
  in.map_by_node = o.map_by == "node";  // multi-host mapping; other --map-by values: topology
  in.local_cpus = cpus_available();
  in.local_name = hostname;
  in.is_local = [&hostname](const std::string& h) { return is_this_machine(h, hostname); };
  // Inside salloc/sbatch without --host: the allocation gives the hosts and -n (docs/slurm.md).
  const auto slurm_use = slurm::apply_slurm_allocation(in, hostname);
  if (slurm_use && o.verbose) std::fprintf(stderr, "sparkrun: %s\n", slurm_use->note.c_str());
  JobPlan plan = make_job_plan(in);

  // A host that is not this machine: node daemons on every host (docs/multihost.md).
  bool remote = false;
  for (const auto& n : plan.nodes) remote = remote || !n.local;
  if (remote) {
    if (!o.topology.empty()) {  // each daemon plans for its live machine (docs/binding.md)
      throw UsageError("--topology plans for one machine: not available with remote hosts");
    }
    MultiHostSpec m;
    m.exports = forwarded.vars;  // the environment rule (forwarded_env.hpp)
    m.working_dir = working_dir(o);
    for (const auto& note : plan.notes) std::fprintf(stderr, "sparkrun: note: %s\n", note.c_str());
    m.job_id = make_job_id();
    m.plan = std::move(plan);
    m.argv = o.command;
    m.format = {o.tag_output, o.timestamp_output};
    // Relative to this directory, as on one host (a remote daemon's own is elsewhere).
    m.output_dir = o.output_dir.empty()
                       ? std::string()
                       : std::filesystem::absolute(o.output_dir).lexically_normal().string();
    m.timeout_s = o.timeout_s;
    m.kill_grace_s = o.kill_grace_s;
    m.verbose = o.verbose;
    m.launch_agent = o.launch_agent;
    // Other nodes of a SLURM allocation: their daemons start as srun steps (docs/slurm.md).
    if (m.launch_agent.empty() && slurm_use && slurm_use->via_srun)
      m.launch_agent = slurm::srun_launch_agent();
    if (slurm_use) m.route_to = slurm_use->node_addresses;
    if (slurm_use)
      m.exports.insert(m.exports.begin(), slurm_use->rank_env.begin(), slurm_use->rank_env.end());
    m.control_net = o.control_net;
    m.bind_to = o.bind_to;
    m.map_by = o.map_by;
    m.report_bindings = o.report_bindings;
    m.nccl_env = o.nccl_env;
    if (!o.report_dir.empty())
      m.report_dir = std::filesystem::absolute(o.report_dir).lexically_normal().string();
    if (!o.metrics_port.empty()) m.metrics = parse_metrics_address(o.metrics_port);
    return run_with_restarts(restart_policy(o), [&m](const Attempt& a) {
      MultiHostSpec s = m;  // each attempt is a new job (restart_loop.hpp)
      if (a.count > 0) s.job_id = make_job_id();
      s.output_dir = attempt_output_dir(s.output_dir, a);
      for (auto& v : restart_env(a.count, a.max_restarts, current_environment(), s.exports))
        s.exports.push_back(std::move(v));
      if (a.report) s.failed = [&a](int, const std::string& line) { a.report(line); };
      const auto trace =
          TraceJob::begin(s.exports);  // SPARK_TRACE: merge the ranks' files at the end
      const int rc = run_multihost(s);
      trace.finish(s.plan.size);
      return rc;
    });
  }

  NodeRunSpec spec;
  spec.base_env = current_environment();
  spec.exports = forwarded.vars;  // the same rule as for remote hosts (forwarded_env.hpp)
  if (!o.wdir.empty()) {          // ranks start there; a relative program path resolves against it
    spec.working_dir = working_dir(o);
    std::error_code ec;
    if (!std::filesystem::is_directory(spec.working_dir, ec)) {
      throw UsageError(
          "--wdir " + o.wdir + ": " + spec.working_dir + " is not a directory on this host" +
          (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : "") +
          "; give an existing one");
    }
  }
  // torchrun's MASTER_ADDR/MASTER_PORT (docs/python.md): rank 0 runs on this machine.
  for (auto& v : torchrun_master_env("127.0.0.1", pick_free_port(), spec.base_env, spec.exports))
    spec.exports.push_back(std::move(v));

  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec || !std::filesystem::is_directory(o.output_dir)) {
      throw UsageError("--output-dir " + o.output_dir + ": cannot create the directory" +
                       (ec ? ": " + ec.message() : std::string()));
    }
  }

  // The program: resolved once, here (execvp's PATH search is not async-signal-safe).
  const char* path_env = std::getenv("PATH");
  auto program = resolve_program(o.command.front(), path_env ? path_env : "");
  if (!program) {
    std::fprintf(stderr, "sparkrun: cannot start rank 0: %s: command not found in PATH\n",
                 o.command.front().c_str());
    return kExitCannotStart;
  }

  for (const auto& note : plan.notes) std::fprintf(stderr, "sparkrun: note: %s\n", note.c_str());

  spec.job_id = make_job_id();
  spec.plan = std::move(plan);
  spec.node = 0;                  // single host: the launcher runs the (only) node itself
  spec.control_interface = "lo";  // --nccl-env: every rank is here (MASTER_ADDR 127.0.0.1)
  plan_node_binding(binding_options(o), spec);  // cores and lanes per rank (docs/binding.md)
  if (o.verbose) say_elapsed(started, "binding planned (topology loaded)");
  spec.program_path = *program;
  spec.argv = o.command;
  spec.format = {o.tag_output, o.timestamp_output};
  spec.output_dir = o.output_dir;
  spec.write_report = true;
  if (!o.metrics_port.empty()) spec.metrics = parse_metrics_address(o.metrics_port);
  if (!o.report_dir.empty())
    spec.report_dir = std::filesystem::absolute(o.report_dir).lexically_normal().string();
  spec.timeout_s = o.timeout_s;
  spec.kill_grace_s = o.kill_grace_s;
  spec.verbose = o.verbose;
  spec.report_wireup = o.verbose || o.report_bindings;
  spec.signal_group = o.signal_group;
  spec.verbose_since = started;
  spec.exit_after_run = true;  // sparkrun ends with the job: no PMIx teardown (main() below)
  return run_with_restarts(restart_policy(o), [&spec](const Attempt& a) {
    NodeRunSpec s = spec;  // each attempt is a new job (restart_loop.hpp)
    if (a.count > 0) s.job_id = make_job_id();
    s.output_dir = attempt_output_dir(s.output_dir, a);
    for (auto& v : restart_env(a.count, a.max_restarts, s.base_env, s.exports))
      s.exports.push_back(std::move(v));
    if (a.report) s.link.failed = [&a](int, const std::string& line, bool) { a.report(line); };
    const auto trace =
        TraceJob::begin(s.exports);  // SPARK_TRACE: merge the ranks' files at the end
    const int rc = run_node(s);
    trace.finish(s.plan.size);
    return rc;
  });
}

int sparkrun_main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();  // -v times count from here
  // Block the signals the event loop takes through a signalfd, before any thread exists
  // (PMIx's threads inherit the mask, so the signals reach only the signalfd).
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher (ranks reset it)
  // Node daemon mode (hidden; started by a multi-host launcher through its launch agent).
  if (argc >= 2 && std::strcmp(argv[1], "--daemon") == 0) return daemon_main(argc, argv);

  if (argc >= 2) {
    for (const auto& sub : subcommands()) {
      if (sub.name == argv[1]) return sub.run(argc - 1, argv + 1);
    }
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    ParseResult r = parse_options(args);
    switch (r.action) {
      case Action::kHelp:
        std::fputs(r.help.c_str(), stdout);
        std::fputs("\nSubcommands (sparkrun SUBCOMMAND --help):\n", stdout);
        for (const auto& sub : subcommands()) {
          std::printf("  %-8.*s %.*s\n", static_cast<int>(sub.name.size()), sub.name.data(),
                      static_cast<int>(sub.summary.size()), sub.summary.data());
        }
        std::fputs("\nDocs: docs/user-guide.md\n", stdout);
        return 0;
      case Action::kVersion:
        std::printf("sparkrun %s\n", SPARK_LAUNCH_VERSION);
        return 0;
      case Action::kPrintConfig:
        return print_config(r.options.exports);
      case Action::kRun:
        break;
    }
    // The lean sparkrun passes jobs that may need the multi-host part on to sparkrun-full
    // (lean_handover.hpp); a no-op in sparkrun-full.
    hand_over_if_needed(r.options);
    // The ranks' SPARK_* / SPARKNET_* environment, checked before anything starts (ranks, or
    // --fabric's discovery job): a value every rank would refuse ends here, with its message.
    const auto env = current_environment();
    const ForwardedEnv forwarded = forwarded_env(env, r.options.exports, r.options.env_all);
    for (const auto& w : forwarded.warnings)
      std::fprintf(stderr, "sparkrun: warning: %s\n", w.c_str());
    {
      for (const auto& line : unknown_setting_warnings(env, forwarded.vars))  // typos: say so
        std::fprintf(stderr, "sparkrun: warning: %s\n", line.c_str());
      const std::string refused = check_rank_env(env, forwarded.vars);
      if (!refused.empty()) {
        std::fprintf(stderr, "sparkrun: error: %s\nsparkrun: no rank was started\n",
                     refused.c_str());
        return kExitUsage;
      }
      start_launch_log(env, forwarded.vars, "", "sparkrun");  // SPARK_LOG for the launcher's steps
    }
    if (!r.options.fabric_file.empty()) {
      if (int rc = check_pinned_fabric(args, r.options.command.size(), r.options.fabric_file))
        return rc;
    }
    return launch(r.options, started, forwarded);
  } catch (const UsageError& e) {
    return report_usage_error(e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace spark::launch

int main(int argc, char** argv) {
  const int rc = spark::launch::sparkrun_main(argc, argv);
#ifdef SPARK_LAUNCH_HAVE_PMIX
  if (spark::launch::finalize_abandoned()) {
    // PMIx's threads are still inside the library (left running at the end of a one-host
    // job, or a finalize that did not return): skip every exit-time destructor.
    std::fflush(nullptr);
    std::_Exit(rc);
  }
#endif
  return rc;
}
