#include "ompi_direct_launch.hpp"

namespace spark::launch {

// Open MPI 4.1 picks its run-time ("ess") component from the launch environment that its
// "schizo" components recognise (mpirun, SLURM, Flux, ...). None recognises sparkrun, so
// the ess "singleton" component wins and every rank becomes a one-rank job. The schizo
// components for resource managers that launch directly (Flux, SLURM) do nothing more than
// select the "pmi" ess component through the MCA variable below; setting it ourselves gives
// the same result without pretending to be another resource manager.
std::vector<EnvVar> open_mpi_direct_launch_env(bool externally_bound) {
  std::vector<EnvVar> env = {{"OMPI_MCA_ess", "pmi"}};
  if (externally_bound) {
    env.emplace_back("OMPI_MCA_hwloc_base_binding_policy", "none");
    env.emplace_back("OMPI_MCA_orte_externally_bound", "1");
  }
  return env;
}

}  // namespace spark::launch
