// Host lists: "--host a:2,b" and Open MPI-style hostfiles ("name [slots=N] [max_slots=N]",
// '#' comments). Errors cite the file and line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark::launch {

struct HostSlots {
  std::string name;
  int slots = 1;
  bool slots_given = false;  // false: "as many as this host has cores" is not assumed
};

/// Parses one --host value: "a", "a:4", "a:4,b:2". Throws UsageError.
std::vector<HostSlots> parse_host_list(std::string_view spec);

/// Parses hostfile text; `source` names the file in errors ("hosts.txt:3: ...").
std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& source);

/// Reads and parses a hostfile. Throws UsageError when it cannot be read.
std::vector<HostSlots> read_hostfile(const std::string& path);

/// Merges repeated names (slots add up), keeping first-seen order.
std::vector<HostSlots> merge_hosts(const std::vector<HostSlots>& hosts);

}  // namespace spark::launch
