// The launcher's hook for SLURM: inside an allocation (salloc, sbatch) and without a host
// list, the allocation decides where ranks run and how many there are by default.
#pragma once

#include <optional>
#include <string>

#include "job_plan.hpp"
#include "slurm_allocation.hpp"

namespace spark::launch::slurm {

/// When `alloc` is set and the user gave no --host/--hostfile (in.hosts empty): the
/// allocation's nodes become the host list (slots = SLURM_TASKS_PER_NODE), and -n defaults
/// to its task count (SLURM_NTASKS). Refuses with UsageError (exit 2, nothing started):
///  - an explicit -n larger than the allocation's tasks (without --oversubscribe),
///  - ranks that would land on another node than this one: that needs node daemons started
///    with srun (the multi-host launch), not available yet.
/// `hostname` is this machine's name. Returns a one-line description for --verbose, or
/// nothing when the allocation was not used (no allocation, or an explicit host list).
std::optional<std::string> apply_allocation(PlanInput& in, const std::optional<Allocation>& alloc,
                                            const std::string& hostname);

/// apply_allocation(in, read_allocation_from_process(), hostname), with a malformed SLURM
/// environment reported as UsageError (exit 2) rather than a crash.
std::optional<std::string> apply_slurm_allocation(PlanInput& in, const std::string& hostname);

}  // namespace spark::launch::slurm
