// The launcher's hook for SLURM: inside an allocation (salloc, sbatch) and without a host
// list, the allocation decides where ranks run and how many there are by default.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "job_plan.hpp"
#include "slurm_allocation.hpp"

namespace spark::launch::slurm {

/// How the launcher uses an allocation.
struct AllocationUse {
  std::string note;       ///< one line for --verbose
  bool via_srun = false;  ///< ranks on other nodes: start node daemons with srun_launch_agent()
  /// With via_srun: NodeAddr of the nodes whose names do not resolve here (from slurmctld),
  /// for choosing the control-plane address the daemons connect back to.
  std::map<std::string, std::string> node_addresses;
  /// With via_srun: the allocation's job-wide variables as this process sees them
  /// (SLURM_NTASKS, SLURM_TASKS_PER_NODE, SLURM_JOB_NODELIST, ...), for every rank: a daemon
  /// step's own values (SLURM_NTASKS=1, ...) describe the one-task step, not the job.
  std::vector<std::pair<std::string, std::string>> rank_env;
};

/// The launch agent that starts one node daemon on one node of the allocation: a one-task
/// step on that node. `--overlap` so that the daemon step does not take the cpus the job's
/// ranks need (the daemon runs them itself), `--input=0` so that the job secret written to
/// srun's stdin reaches the daemon's stdin (never argv or the environment), `--mpi=none`
/// because the daemon runs its own PMIx server, `--cpu-bind=none` so that the daemon sees the
/// job's cpus on the node (its binding stays inside them), no `--exact`: the step gets every
/// cpu of the job on that node.
std::string srun_launch_agent();

/// When `alloc` is set and the user gave no --host/--hostfile (in.hosts empty): the
/// allocation's nodes become the host list (slots = SLURM_TASKS_PER_NODE), and -n defaults
/// to its task count (SLURM_NTASKS). When every rank lands on this machine, the plan is a
/// local one (as before); otherwise the hosts keep their SLURM node names, only the node this
/// process runs on (SLURMD_NODENAME) counts as local, and via_srun is set: every other node
/// gets its daemon through srun. Refuses with UsageError (exit 2, nothing started) an
/// explicit -n larger than the allocation's tasks (without --oversubscribe).
/// `hostname` is this machine's name. Returns nothing when the allocation was not used (no
/// allocation, or an explicit host list).
std::optional<AllocationUse> apply_allocation(PlanInput& in, const std::optional<Allocation>& alloc,
                                              const std::string& hostname);

/// apply_allocation(in, read_allocation_from_process(), hostname), with a malformed SLURM
/// environment reported as UsageError (exit 2) rather than a crash.
std::optional<AllocationUse> apply_slurm_allocation(PlanInput& in, const std::string& hostname);

}  // namespace spark::launch::slurm
