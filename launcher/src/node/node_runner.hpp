// The local node runner: hosts the PMIx server for this node's ranks, starts them, forwards
// their output, watches them and stops the whole group on the first failure. It knows
// nothing about the command line: sparkrun's launcher mode builds a NodeRunSpec from the
// job plan, and a node daemon builds the same from the launcher's message.
#pragma once

#include <sched.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job_plan.hpp"
#include "line_forwarder.hpp"
#include "metrics_server.hpp"
#include "rank_env.hpp"

namespace spark::launch {

// Set by a node daemon (daemon.cpp, multi-host jobs); left empty in launcher mode.
struct NodeLink {
  // Replaces the node-local fence: this node's PMIx contributions go to the launcher;
  // `complete` (callable from any thread, once) gets every node's data back.
  std::function<void(std::string data, std::function<void(std::string all)> complete)> fence;
  // The node's first failure, right after its line was printed (exit code, that line, whether
  // it is a rank's fail-stop timeout).
  std::function<void(int code, const std::string& line, bool timed_out)> failed;
  // Called with a thread-safe stop function before the ranks start, and with an empty one
  // before run_node returns. stop(false, ...): group abort (SIGTERM, grace); stop(true, ...):
  // SIGKILL now. stuck: the job failed by a fail-stop timeout (or --timeout) elsewhere, so
  // this host's report part takes its ranks' stacks too.
  std::function<void(std::function<void(bool now, bool stuck)> stop)> attach;
};

struct NodeRunSpec {
  std::string job_id;
  JobPlan plan;
  int node = 0;                       // index into plan.nodes: the node run here
  std::string program_path;           // resolved
  std::vector<std::string> argv;      // argv[0] as the user typed it
  std::vector<std::string> base_env;  // environment to start from ("NAME=value")
  std::vector<EnvVar> exports;        // forwarded_env.hpp's variables (SPARK_*, -x, --env-all)
  std::string working_dir;            // the ranks' directory (--wdir; multi-host: the
                                      // launcher's); empty: this process's own
  OutputFormat format;
  std::string output_dir;  // empty: forward to our stdout/stderr
  // A failed job's report (the ranks' flight recorders, stacks after a timeout) goes to
  // report_dir (empty: report.JOB_ID in $SPARK_REPORT_DIR, else in this process's directory)
  // when write_report is set
  // (the launcher on one host; a node daemon leaves it off).
  bool write_report = false;
  std::string report_dir;
  // A node daemon's files carry its host's name (flight.HOST.json, stacks.HOST.txt): on a
  // shared working directory every host's part lands in the one folder. A daemon also writes
  // its part when the launcher stops the job for another host's failure.
  bool report_per_host = false;
  std::optional<MetricsAddress> metrics;  // --metrics-port
  std::optional<double> timeout_s;
  double kill_grace_s = 2.0;
  bool verbose = false;
  // -v / --report-bindings: the ranks print their per-peer transport and lanes at wire-up
  // (SPARK_LOG=info:wireup unless the user set SPARK_LOG; docs/roce.md).
  bool report_wireup = false;
  bool signal_group = false;  // SIGUSR1/2 to each rank's process group, not only the rank
  // The process ends right after run_node (sparkrun on one host): PMIx's server is left to
  // the process exit instead of finalized (PmixServer::leave_to_exit; main() then leaves with
  // _exit). A node daemon, which talks to the launcher afterwards, finalizes.
  bool exit_after_run = false;
  // For --verbose: the times printed are since this point (main's start when set).
  std::optional<std::chrono::steady_clock::time_point> verbose_since;
  // Binding, per local rank (empty or nullopt: unbound). Filled by the topology part.
  std::vector<std::optional<cpu_set_t>> cpusets;
  std::vector<std::string> cpuset_text;  // SPARK_CPUSET per local rank ("15-19")
  std::vector<std::string> lanes;        // SPARK_LANES per local rank
  // --nccl-env: the interface NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME name (the control
  // network: "lo" on one host, a daemon's interface towards the launcher), set before binding;
  // the binding step fills the variables per local rank (empty: none). The user's values win.
  std::string control_interface;
  std::vector<std::vector<EnvVar>> nccl_env;
  // This machine's hwloc topology (hwloc_topology_t), when the binding step loaded the live
  // machine: the PMIx server gets the same one instead of a second load (~1-2 ms). Null: the
  // runner loads a minimal one itself. `topology_owner` keeps it alive.
  void* hwloc_topology = nullptr;
  std::shared_ptr<const void> topology_owner;
  NodeLink link;  // multi-host hooks (daemon mode)
};

/// Runs the node's ranks to completion; returns sparkrun's exit code (see exit_rules.hpp).
int run_node(const NodeRunSpec& spec);

}  // namespace spark::launch
