// The job plan: which rank runs on which node, with which local rank. Made once from the
// options on the submitting host; a node runner (this process or, later, a node daemon)
// gets its own part of it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hostfile.hpp"

namespace spark::launch {

struct RankSlot {
  int rank = 0;
  int node = 0;        // index into JobPlan::nodes
  int local_rank = 0;  // index among the ranks of its node
};

struct NodePlan {
  std::string host;   // the name given in the host list (SPARK_HOST, PMIX_HOSTNAME)
  bool local = true;  // this machine
  int slots = 0;
  std::vector<int> ranks;  // global ranks, ascending
};

struct JobPlan {
  int size = 0;
  std::vector<NodePlan> nodes;     // only nodes that run at least one rank
  std::vector<RankSlot> ranks;     // indexed by rank
  std::vector<std::string> notes;  // one-line notes for stderr (e.g. cores shared)
};

struct PlanInput {
  std::optional<int> np;
  std::optional<int> per_node;   // -N: exactly this many slots on every host
  std::vector<HostSlots> hosts;  // empty: this machine only
  bool oversubscribe = false;
  bool map_by_node = false;  // --map-by node: one rank per host in turn (default: fill slots)
  int local_cpus = 1;        // cpus sparkrun may use here
  std::string local_name;    // this machine's name when no host list is given
  std::function<bool(const std::string&)> is_local;  // host name -> this machine?
};

/// Builds the plan; throws UsageError (too many ranks for the slots, remote hosts, ...).
JobPlan make_job_plan(const PlanInput& in);

/// True for localhost, 127.x.y.z, ::1 and this machine's host name (short or full).
bool is_this_machine(const std::string& host, const std::string& hostname);

}  // namespace spark::launch
