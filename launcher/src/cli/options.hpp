// sparkrun's command line: mpirun-style options, parsed with CLI11 into a plain struct.
// Pure (no I/O, no environment access) so that unit tests can call it directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace spark::launch {

struct Options {
  std::optional<int> np;             // -n / -np / --np
  std::vector<std::string> hosts;    // --host / -H values, each "h[:slots][,h2...]"
  std::string hostfile;              // --hostfile / --machinefile
  std::vector<std::string> exports;  // -x VAR or -x VAR=value, in order
  bool tag_output = false;           // --tag-output: "[rank] " before each line
  bool timestamp_output = false;     // --timestamp-output
  std::string output_dir;            // --output-dir: DIR/rank.N/{stdout,stderr}
  std::optional<double> timeout_s;   // --timeout SECONDS (exit 124)
  double kill_grace_s = 2.0;         // --kill-grace SECONDS between SIGTERM and SIGKILL
  bool oversubscribe = false;        // allow more ranks than slots
  bool verbose = false;              // --verbose: launch timings on stderr
  std::string launch_agent;          // --launch-agent CMD ({host}); empty: ssh (multi-host)
  std::string control_net;           // --control-net IFACE|CIDR (multi-host control plane)
  std::string fabric_file;           // --fabric FILE: pinned fabric map, checked before start

  // Binding (filled in by the topology part; the launcher passes them on untouched).
  std::string bind_to;           // --bind-to
  std::string map_by;            // --map-by
  bool report_bindings = false;  // --report-bindings
  std::string topology;          // --topology XML

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

}  // namespace spark::launch
