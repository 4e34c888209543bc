#include "slurm_plan.hpp"

#include <algorithm>

#include "slurm_nodes.hpp"
#include "usage_error.hpp"

namespace spark::launch::slurm {

std::string srun_launch_agent() {
  // `env -u`: srun gives its task the per-task variables of a one-task step (SLURM_PROCID=0,
  // ...); the daemon's ranks must not inherit them (programs read them as their rank).
  return "srun --overlap --nodes=1 --ntasks=1 --nodelist={host} --input=0 --mpi=none "
         "--cpu-bind=none --kill-on-bad-exit=1 --job-name=sparkrun-daemon --quiet "
         "env -u SLURM_PROCID -u SLURM_LOCALID -u SLURM_NODEID -u SLURM_GTIDS -u SLURM_TASK_PID";
}

std::optional<AllocationUse> apply_allocation(PlanInput& in, const std::optional<Allocation>& alloc,
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

  // Which nodes get ranks: fill the allocation's tasks in node order, as make_job_plan does
  // (--map-by node spreads them over every node).
  int placed = 0;
  bool remote = false;
  for (const NodeSlots& n : a.nodes) {
    if (!in.map_by_node && placed >= np) break;
    placed += n.tasks;
    const bool here = (!a.this_node.empty() && n.name == a.this_node) ||
                      (in.is_local ? in.is_local(n.name) : is_this_machine(n.name, hostname));
    remote = remote || !here;
  }

  AllocationUse use;
  in.np = np;
  in.hosts.clear();
  if (!remote) {
    for (const NodeSlots& n : a.nodes) {
      // A node that this machine answers to under another name (SLURMD_NODENAME) is listed
      // by the name the plan recognises as local.
      const bool this_one = !a.this_node.empty() && n.name == a.this_node;
      if (n.tasks > 0) in.hosts.push_back({this_one ? hostname : n.name, n.tasks, true});
    }
  } else {
    // Node daemons: one per node, through srun, on every node but the one this process runs
    // on as part of the job (a batch script's node). Only SLURMD_NODENAME says that: a
    // login node running salloc's shell may share a name with a node yet is not in the job.
    for (const NodeSlots& n : a.nodes) {
      if (n.tasks > 0) in.hosts.push_back({n.name, n.tasks, true});
    }
    in.is_local = [node = a.this_node](const std::string& h) { return !node.empty() && h == node; };
    use.via_srun = true;
  }
  std::string nodes;
  for (const NodeSlots& n : a.nodes) {
    nodes += (nodes.empty() ? "" : ",") + n.name + ":" + std::to_string(n.tasks);
  }
  use.note = "SLURM allocation " + a.job_id + ": " + std::to_string(np) + " ranks on " + nodes +
             (a.cpus.empty() ? "" : " (cpus " + format_cpu_list(a.cpus) + ")") +
             (use.via_srun ? "; node daemons through srun" : "");
  return use;
}

std::optional<AllocationUse> apply_slurm_allocation(PlanInput& in, const std::string& hostname) {
  if (!in.hosts.empty()) return std::nullopt;
  std::optional<Allocation> alloc;
  try {
    alloc = read_allocation_from_process();
  } catch (const SlurmError& e) {
    throw UsageError(e.what());
  }
  auto use = apply_allocation(in, alloc, hostname);
  if (use && use->via_srun) {
    std::vector<std::string> names;
    for (const auto& h : in.hosts) names.push_back(h.name);
    use->node_addresses = unresolved_node_addresses(names);
    const auto env = slurm_environment();
    for (const char* key :
         {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE", "SLURM_JOB_NODELIST",
          "SLURM_NODELIST", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_JOB_CPUS_PER_NODE"}) {
      if (auto it = env.find(key); it != env.end()) use->rank_env.emplace_back(key, it->second);
    }
  }
  return use;
}

}  // namespace spark::launch::slurm
