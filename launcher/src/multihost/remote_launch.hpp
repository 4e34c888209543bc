// Multi-host launch: the launcher as coordinator. Starts one node daemon per host of the
// plan (through the launch agent; directly for this machine), serves the control plane,
// combines fences, forwards the daemons' output, and turns any node's failure, a lost
// daemon or --timeout into a group abort on every host. See docs/multihost.md.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "job_plan.hpp"
#include "line_forwarder.hpp"
#include "metrics_server.hpp"
#include "rank_env.hpp"

namespace spark::launch {

struct MultiHostSpec {
  std::string job_id;
  JobPlan plan;
  std::vector<std::string> argv;  // the program and its arguments, as typed
  std::vector<EnvVar> exports;    // forwarded_env.hpp's variables, resolved here
  std::string working_dir;        // absolute: the ranks' directory on every host
  OutputFormat format;
  std::string output_dir;  // on each host
  std::optional<double> timeout_s;
  double kill_grace_s = 2.0;
  bool verbose = false;
  std::string launch_agent;                     // empty: kDefaultLaunchAgent
  std::string control_net;                      // empty: route to each host
  std::map<std::string, std::string> route_to;  // host -> address to route to (SLURM NodeAddr)
  // Binding, planned by each node's daemon for its own machine (docs/binding.md).
  std::string bind_to;
  std::string map_by;
  bool report_bindings = false;
  bool nccl_env = false;  // --nccl-env (docs/roce.md): each daemon fills its ranks' variables
  // A failed job's report on the launch host (the hosts' parts, gathered): --report-dir;
  // empty: report.JOB_ID in $SPARK_REPORT_DIR, else in this process's directory.
  std::string report_dir;
  std::optional<MetricsAddress> metrics;  // --metrics-port: every host's ranks, merged here
  // The job's first failure (exit code, its line; the line may be empty), once (--max-restarts).
  std::function<void(int code, const std::string& line)> failed;
};

/// Runs the job across the hosts; returns sparkrun's exit code.
int run_multihost(const MultiHostSpec& spec);

}  // namespace spark::launch
