#include "subcommands.hpp"

#include <array>

#include "doctor.hpp"
#ifdef SPARK_LAUNCH_HAVE_FABRIC
#include "fabric_command.hpp"
#endif
#ifdef SPARK_LAUNCH_HAVE_TOPOLOGY
#include "topo_command.hpp"
#endif

namespace spark::launch {

// One line per subcommand: {"topo", "show the machine's topology", &topo_main}, ...
// (parts that add one declare its function in their own header and add it here).
namespace {
constexpr Subcommand kSubcommands[] = {
    {"doctor",
     "check RDMA devices, GIDs, MTU, locked memory, libraries; with -n/--host: round trips "
     "between every pair of ranks on every lane",
     &doctor::doctor_main},
#ifdef SPARK_LAUNCH_HAVE_FABRIC
    {"fabric", "discover (and --write / check --fabric) the per-peer lane map of a host list",
     &fabric_main},
#endif
#ifdef SPARK_LAUNCH_HAVE_TOPOLOGY
    {"topo", "show the machine (or --topology FILE) as sparkrun's binding sees it", &topo_main},
#endif
};
}  // namespace

std::span<const Subcommand> subcommands() {
  return kSubcommands;
}

}  // namespace spark::launch
