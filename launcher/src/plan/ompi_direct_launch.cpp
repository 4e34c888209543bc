#include "ompi_direct_launch.hpp"

namespace spark::launch {

// Open MPI 4.1 decides how it was launched in its "schizo" framework before it picks its
// run-time ("ess") component. Each resource manager it knows (mpirun, SLURM, Flux, JSM)
// has a schizo component; when none claims the process, the catch-all component "orte"
// declares it an unmanaged singleton and forces OMPI_MCA_ess=singleton, so every rank
// becomes a job of its own even though a PMIx server is right there.
//
// sparkrun excludes that catch-all component and selects the PMIx-based ess component
// itself. This is what the Flux/SLURM components do for their direct launches (set
// OMPI_MCA_ess=pmi), without pretending to be another resource manager (FLUX_JOB_ID would
// also work, but it tells other software that Flux runs the job). Direct launch needs no
// OMPI_ALLOW_RUN_AS_ROOT: that check lives in mpirun only.
std::vector<EnvVar> open_mpi_direct_launch_env(bool externally_bound) {
  std::vector<EnvVar> env = {{"OMPI_MCA_schizo", "^orte"}, {"OMPI_MCA_ess", "pmi"}};
  if (externally_bound) {
    // sparkrun applied the binding before exec: Open MPI must not rebind.
    env.emplace_back("OMPI_MCA_hwloc_base_binding_policy", "none");
    env.emplace_back("OMPI_MCA_orte_externally_bound", "1");
  }
  return env;
}

}  // namespace spark::launch
