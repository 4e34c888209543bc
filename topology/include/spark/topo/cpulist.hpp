// CPU lists in the kernel's notation ("0-3,8,15-19"), as in /proc/self/status and cpuset files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark::topo {

/// Sorted, de-duplicated list -> "0-3,8,15-19". Empty list -> "".
std::string format_cpu_list(std::vector<int> cpus);

/// Strict parse of "0-3,8". Rejects "", "abc", "3-1", "1,,2", "1,", " 1", out-of-range
/// numbers; throws TopologyError naming `what` (e.g. "--cpu-list") and the bad part.
std::vector<int> parse_cpu_list(std::string_view text, std::string_view what = "cpu list");

}  // namespace spark::topo
