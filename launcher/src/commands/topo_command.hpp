// `sparkrun topo [--topology FILE]`: the machine as sparkrun's binding sees it (owned by the
// topology part).
#pragma once

namespace spark::launch {

/// argv[0] is "topo". Prints spark::topo::describe() on stdout; exit 0, or 2 on bad input.
int topo_main(int argc, char** argv);

}  // namespace spark::launch
