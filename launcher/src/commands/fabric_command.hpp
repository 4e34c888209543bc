// `sparkrun fabric`: discover the fabric map of a host list (docs/fabric.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace spark::launch {

/// sparkrun fabric [--write FILE] [--fabric FILE] LAUNCH-OPTIONS (e.g. -n 3 --host a,b,c)
/// Runs spark_fabric_discover on every host through sparkrun itself and returns its status.
int fabric_main(int argc, char** argv);

}  // namespace spark::launch

namespace spark::launch {

/// `sparkrun --fabric FILE ...`: runs `sparkrun fabric --fabric FILE` with the job's launch
/// options (`args` = sparkrun's arguments, whose last `command_size` are the program) before
/// the job starts. 0 when the map matches; else the status to exit with (refused).
int check_pinned_fabric(const std::vector<std::string>& args, std::size_t command_size,
                        const std::string& file);

}  // namespace spark::launch
