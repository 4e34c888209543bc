// Prints the SLURM allocation exactly as sparkrun reads it (spark_slurm), one key=value per
// line, so the SLURM tests can compare it with what salloc / sbatch really set.
#include <cstdio>
#include <string>

#include "slurm_allocation.hpp"

int main() {
  using namespace spark::launch::slurm;
  try {
    const auto a = read_allocation_from_process();
    if (!a) {
      std::printf("allocation=none\n");
      return 0;
    }
    std::string nodes;
    for (const NodeSlots& n : a->nodes) {
      nodes += (nodes.empty() ? "" : ",") + n.name + ":" + std::to_string(n.tasks);
    }
    std::printf("job=%s\nnodes=%s\nntasks=%d\ncpus_on_node=%s\nthis_node=%s\ncpus=%s\n",
                a->job_id.c_str(), nodes.c_str(), a->ntasks,
                a->cpus_on_node ? std::to_string(*a->cpus_on_node).c_str() : "unset",
                a->this_node.c_str(), format_cpu_list(a->cpus).c_str());
    return 0;
  } catch (const SlurmError& e) {
    std::fprintf(stderr, "allocation_probe: %s\n", e.what());
    return 2;
  }
}
