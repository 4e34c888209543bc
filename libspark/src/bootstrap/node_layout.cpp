#include "bootstrap/node_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>

namespace spark::bootstrap {

NodeLayout derive_layout(const std::vector<std::string>& node_ids, int rank) {
  NodeLayout layout;
  const std::string& mine = node_ids.at(static_cast<std::size_t>(rank));
  std::vector<std::string> seen;
  layout.local_size = 0;
  for (int r = 0; r < static_cast<int>(node_ids.size()); ++r) {
    const auto& id = node_ids[static_cast<std::size_t>(r)];
    if (std::find(seen.begin(), seen.end(), id) == seen.end()) seen.push_back(id);
    if (id == mine) {
      if (r < rank) ++layout.local_rank;
      ++layout.local_size;
    }
  }
  layout.node_rank = static_cast<int>(std::find(seen.begin(), seen.end(), mine) - seen.begin());
  return layout;
}

std::string local_machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;  // stays empty when unreadable
  std::getline(in, id);
  return id;
}

int ranks_sharing_machine(const std::vector<std::string>& machine_ids,
                          const std::vector<std::string>& node_ids, int rank) {
  // A rank whose id could not be read is on the machine of its node's other ranks.
  auto machine_of = [&](std::size_t r) -> const std::string& {
    for (std::size_t q = 0; q < node_ids.size() && machine_ids[r].empty(); ++q)
      if (node_ids[q] == node_ids[r] && !machine_ids[q].empty()) return machine_ids[q];
    return machine_ids[r];
  };
  const auto me = static_cast<std::size_t>(rank);
  const std::string& machine = machine_of(me);
  int n = 0;
  for (std::size_t r = 0; r < node_ids.size(); ++r)
    if (node_ids[r] == node_ids[me] || (!machine.empty() && machine_of(r) == machine)) ++n;
  return n;
}

std::string local_node_id(const config::Config& config) {
  if (auto host = config.value("SPARK_HOST")) return *host;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace spark::bootstrap
