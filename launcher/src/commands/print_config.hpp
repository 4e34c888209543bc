// `sparkrun --print-config`: the SPARK_/SPARKNET_ knob table (libspark's spark_config) with
// each knob's value, where it came from, and its doc.
#pragma once

namespace spark::launch {

/// Prints the table to stdout; returns the exit code (2 when a variable is refused).
int print_config();

}  // namespace spark::launch
