// Open MPI 4.1 direct launch: the variables that make an Open MPI program started by
// sparkrun (not mpirun) join the PMIx job instead of declaring itself a singleton.
// Everything Open MPI-specific lives here; see docs/launcher.md.
#pragma once

#include <vector>

#include "rank_env.hpp"

namespace spark::launch {

/// `externally_bound`: sparkrun has already bound the rank (Open MPI must not rebind).
std::vector<EnvVar> open_mpi_direct_launch_env(bool externally_bound);

}  // namespace spark::launch
