// `sparkrun --print-config [-x NAME=value ...]`: the SPARK_/SPARKNET_ knob table (libspark's
// spark_config) with each knob's value as the ranks would read it (environment, then -x),
// where it came from, and its doc.
#pragma once

#include <string>
#include <vector>

namespace spark::launch {

/// Prints the table to stdout and one warning per unknown SPARK_* / SPARKNET_* name to stderr;
/// returns the exit code (2 when a variable is refused). `exports`: the -x arguments (throws
/// UsageError for one that names no variable or an unset one, as a launch would).
int print_config(const std::vector<std::string>& exports);

}  // namespace spark::launch
