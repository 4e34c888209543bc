#include "slurm_plan.hpp"

#include <algorithm>

#include "usage_error.hpp"

namespace spark::launch::slurm {

std::optional<std::string> apply_allocation(PlanInput& in, const std::optional<Allocation>& alloc,
                                            const std::string& hostname) {
  if (!alloc || !in.hosts.empty()) return std::nullopt;  // an explicit host list wins
  const Allocation& a = *alloc;
  const int np = in.np.value_or(a.ntasks);
  if (np > a.ntasks && !in.oversubscribe) {
    throw UsageError("-n " + std::to_string(np) + " is more than the " + std::to_string(a.ntasks) +
                     " tasks of SLURM allocation " + a.job_id +
                     "; ask SLURM for more (salloc/sbatch -n " + std::to_string(np) +
                     ") or add --oversubscribe");
  }

  // Which nodes get ranks: fill the allocation's tasks in node order, as make_job_plan does.
  int placed = 0;
  std::string remote;
  for (const NodeSlots& n : a.nodes) {
    if (placed >= np) break;
    placed += n.tasks;
    const bool here = (!a.this_node.empty() && n.name == a.this_node) ||
                      (in.is_local ? in.is_local(n.name) : is_this_machine(n.name, hostname));
    if (!here) remote += (remote.empty() ? "" : ",") + n.name;
  }
  if (!remote.empty()) {
    throw UsageError("SLURM allocation " + a.job_id + " puts ranks on node(s) " + remote +
                     ", which are not this machine (" + hostname +
                     "); starting sparkrun's node daemons there with srun is not implemented yet. "
                     "Meanwhile run 'srun --mpi=pmix -n " +
                     std::to_string(np) +
                     " ./app' (SLURM's own PMIx server), or run sparkrun on a one-node allocation "
                     "from within it (e.g. in an sbatch script)");
  }

  in.np = np;
  in.hosts.clear();
  for (const NodeSlots& n : a.nodes) {
    // A node that this machine answers to under another name (SLURMD_NODENAME) is listed by
    // the name the plan recognises as local.
    const bool this_one = !a.this_node.empty() && n.name == a.this_node;
    if (n.tasks > 0) in.hosts.push_back({this_one ? hostname : n.name, n.tasks, true});
  }
  std::string nodes;
  for (const NodeSlots& n : a.nodes) {
    nodes += (nodes.empty() ? "" : ",") + n.name + ":" + std::to_string(n.tasks);
  }
  return "SLURM allocation " + a.job_id + ": " + std::to_string(np) + " ranks on " + nodes +
         (a.cpus.empty() ? "" : " (cpus " + format_cpu_list(a.cpus) + ")");
}

std::optional<std::string> apply_slurm_allocation(PlanInput& in, const std::string& hostname) {
  if (!in.hosts.empty()) return std::nullopt;
  std::optional<Allocation> alloc;
  try {
    alloc = read_allocation_from_process();
  } catch (const SlurmError& e) {
    throw UsageError(e.what());
  }
  return apply_allocation(in, alloc, hostname);
}

}  // namespace spark::launch::slurm
