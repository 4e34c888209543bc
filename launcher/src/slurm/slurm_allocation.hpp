// What a SLURM allocation gives sparkrun when it runs inside one (salloc, sbatch): the job,
// its nodes with their task counts, and the cpus this process may use. Reading is split into
// a pure part (from a map, for tests) and the process part (environ + sched_getaffinity).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slurm_hostlist.hpp"

namespace spark::launch::slurm {

struct NodeSlots {
  std::string name;  ///< the node's SLURM name (also its host name on a normal cluster)
  int tasks = 0;     ///< tasks SLURM gave this node (SLURM_TASKS_PER_NODE)
};

struct Allocation {
  std::string job_id;                  ///< SLURM_JOB_ID
  std::optional<std::string> step_id;  ///< SLURM_STEP_ID: set when this process is a step task
  std::vector<NodeSlots> nodes;        ///< SLURM_JOB_NODELIST x SLURM_TASKS_PER_NODE, in order
  int ntasks = 0;                      ///< SLURM_NTASKS, else the sum of the per-node tasks
  std::optional<int>
      cpus_on_node;       ///< SLURM_CPUS_ON_NODE (batch scripts, steps; not salloc's shell)
  std::string this_node;  ///< SLURMD_NODENAME (set on an allocated node), else ""
  std::vector<int> cpus;  ///< cpus this process may run on: binding stays inside

  /// Host names in allocation order (what `--host` would list).
  std::vector<std::string> host_names() const;
  /// True when every rank can run on this machine: one node, and that node is this one
  /// (SLURMD_NODENAME, or `hostname` compared by its short name).
  bool only_node_is(std::string_view hostname) const;
};

/// Reads an allocation from environment variables. Returns nothing when SLURM_JOB_ID is
/// unset (not inside an allocation). Throws SlurmError when SLURM_JOB_ID is set but
/// SLURM_JOB_NODELIST (or SLURM_NODELIST) / SLURM_TASKS_PER_NODE are missing, malformed or
/// disagree (different node and count numbers), or SLURM_NTASKS / SLURM_CPUS_ON_NODE are not
/// positive integers. `cpus` is stored as given (the process's affinity in production).
std::optional<Allocation> read_allocation(const std::map<std::string, std::string>& env,
                                          std::vector<int> cpus);

/// The SLURM_* and SLURMD_* variables of this process (environ).
std::map<std::string, std::string> slurm_environment();

/// The cpus this process may run on (sched_getaffinity); throws SlurmError on failure.
std::vector<int> process_cpus();

/// read_allocation(slurm_environment(), process_cpus()).
std::optional<Allocation> read_allocation_from_process();

}  // namespace spark::launch::slurm
