// `sparkrun <subcommand> ...`: other parts add their tools here (topo, doctor, fabric).
// A subcommand is recognised only as the first argument; a program with the same name
// runs with `sparkrun -- name`.
#pragma once

#include <span>
#include <string_view>

namespace spark::launch {

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
};

/// Every subcommand built into this sparkrun.
std::span<const Subcommand> subcommands();

}  // namespace spark::launch
