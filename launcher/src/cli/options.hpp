// sparkrun's command line: mpirun-style options, parsed with CLI11 into a plain struct, and
// the table of launch options that the subcommands share. Pure (no I/O, no environment
// access) so that unit tests can call it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace spark::launch {

struct Options {
  std::optional<int> np;             // -n / -np / --np
  std::optional<int> per_node;       // -N / --npernode / --map-by ppr:N:node: ranks per host
  std::vector<std::string> hosts;    // --host / -H values, each "h[:slots][,h2...]"
  std::string hostfile;              // --hostfile / --machinefile
  std::vector<std::string> exports;  // -x VAR, VAR=value or a pattern ('NCCL_*'), in order
  bool env_all = false;              // --env-all: the whole environment (forwarded_env.hpp)
  std::string wdir;                  // --wdir / -wdir: the ranks' directory; empty: this one
  bool tag_output = false;           // --tag-output: "[rank] " before each line
  bool timestamp_output = false;     // --timestamp-output
  std::string output_dir;            // --output-dir: DIR/rank.N/{stdout,stderr}
  std::string report_dir;            // --report-dir: a failed job's report; empty: report.JOBID
  std::string metrics_port;          // --metrics-port [ADDR:]PORT: OpenMetrics over HTTP
  std::optional<double> timeout_s;   // --timeout SECONDS (exit 124)
  double kill_grace_s = 2.0;         // --kill-grace SECONDS between SIGTERM and SIGKILL
  int max_restarts = 0;              // --max-restarts N: start the whole group again N times
  double restart_backoff_s = 1.0;    // --restart-backoff SECONDS before each restart
  bool oversubscribe = false;        // allow more ranks than slots
  bool verbose = false;              // --verbose: launch timings on stderr
  std::string launch_agent;          // --launch-agent CMD ({host}); empty: ssh (multi-host)
  std::string control_net;           // --control-net IFACE|CIDR (multi-host control plane)
  std::string fabric_file;           // --fabric FILE: pinned fabric map, checked before start
  bool signal_group = false;         // --signal-group: SIGUSR1/2 to each rank's process group

  // Binding (filled in by the topology part; the launcher passes them on untouched).
  std::string bind_to;           // --bind-to
  std::string map_by;            // --map-by
  bool report_bindings = false;  // --report-bindings
  std::string topology;          // --topology XML
  bool nccl_env = false;         // --nccl-env: NCCL_IB_HCA, NCCL_IB_GID_INDEX, *_SOCKET_IFNAME

  std::vector<std::string> command;  // program and its arguments
};

enum class Action { kRun, kHelp, kVersion, kPrintConfig };

struct ParseResult {
  Action action = Action::kRun;
  Options options;
  std::string help;  // filled for kHelp
};

/// Parses the arguments after argv[0]. Throws UsageError (exit 2) on bad input.
ParseResult parse_options(const std::vector<std::string>& args);

/// The --help text.
std::string help_text();

/// sparkrun's launch options: the one table. The main command line and the subcommands that
/// start a job (doctor, fabric) add it to their CLI11 app, so every option and whether it
/// takes a value is known in one place.
class LaunchOptions {
 public:
  /// Adds the table to `app`; without --fabric when `pinned_fabric` is false (`sparkrun
  /// fabric` has its own).
  explicit LaunchOptions(CLI::App& app, bool pinned_fabric = true);
  /// After parsing: the values, checked (numbers, empty names). Throws UsageError.
  Options finish();
  /// The launch options given, spelled for another sparkrun command line.
  std::vector<std::string> given() const;

 private:
  std::vector<CLI::Option*> table_;
  Options o_;
  std::string np_text_, per_node_text_, timeout_text_, kill_grace_text_, max_restarts_text_,
      restart_backoff_text_;
  bool allow_run_as_root_ = false;  // mpirun's --allow-run-as-root: accepted, nothing to allow
};

/// `sparkrun --daemon ...`: a node daemon that a multi-host sparkrun starts (docs/multihost.md).
struct DaemonOptions {
  std::string address;  // --connect ADDR:PORT: the launcher's control plane
  std::uint16_t port = 0;
  std::uint32_t node = 0;  // --node N
  std::string job;         // --job ID
  std::string host;        // --host NAME: how its lines name this host
};
/// Parses the arguments after "--daemon". Throws UsageError.
DaemonOptions parse_daemon_options(const std::vector<std::string>& args);

/// Parses `args` (after argv[0] or the subcommand) with `app`, mpirun's "-np" spelling
/// accepted; CLI11's refusals become UsageError. Returns what follows a "--" in the
/// options' part (before the program), if there is one.
std::optional<std::vector<std::string>> parse_command_line(CLI::App& app,
                                                           const std::vector<std::string>& args);

}  // namespace spark::launch
