#include "subcommands.hpp"

#include <array>

#include "doctor.hpp"
#include "fabric_command.hpp"
#include "status_command.hpp"
#include "topo_command.hpp"

namespace spark::launch {

// One line per subcommand: {"topo", "show the machine's topology", &topo_main}, ...
// (parts that add one declare its function in their own header and add it here).
namespace {
constexpr Subcommand kSubcommands[] = {
    {"doctor",
     "check RDMA devices, GIDs, MTU, locked memory, libraries; with -n/--host: round trips "
     "between every pair of ranks on every lane",
     &doctor_main},
    {"fabric", "discover (and --write / check --fabric) the per-peer lane map of a host list",
     &fabric_main},
    {"status",
     "a running job's ranks: state, current operation, the peer and lane each waits on, "
     "rates; --stacks for every rank's stacks",
     &status_main},
    {"topo", "show the machine (or --topology FILE) as sparkrun's binding sees it", &topo_main},
};
}  // namespace

std::span<const Subcommand> subcommands() {
  return kSubcommands;
}

}  // namespace spark::launch
