// `sparkrun fabric`: discover the fabric map of a host list (docs/fabric.md).
#pragma once

namespace spark::launch {

/// sparkrun fabric [--write FILE] [--fabric FILE] LAUNCH-OPTIONS (e.g. -n 3 --host a,b,c)
/// Runs spark_fabric_discover on every host through sparkrun itself and returns its status.
int fabric_main(int argc, char** argv);

}  // namespace spark::launch
