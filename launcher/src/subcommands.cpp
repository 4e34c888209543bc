#include "subcommands.hpp"

#include <array>

#include "doctor.hpp"

namespace spark::launch {

// One line per subcommand: {"topo", "show the machine's topology", &topo_main}, ...
// (parts that add one declare its function in their own header and add it here).
namespace {
constexpr std::array<Subcommand, 1> kSubcommands = {{
    {"doctor", "check this host's RDMA devices, GIDs, MTU, locked memory, libraries", &doctor::doctor_main},
}};
}  // namespace

std::span<const Subcommand> subcommands() { return kSubcommands; }

}  // namespace spark::launch
