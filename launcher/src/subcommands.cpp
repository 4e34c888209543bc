#include "subcommands.hpp"

#include <array>

namespace spark::launch {

// One line per subcommand: {"topo", "show the machine's topology", &topo_main}, ...
// (parts that add one declare its function in their own header and add it here).
namespace {
constexpr std::array<Subcommand, 0> kSubcommands = {};
}  // namespace

std::span<const Subcommand> subcommands() { return kSubcommands; }

}  // namespace spark::launch
