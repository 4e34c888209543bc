#include "bootstrap/node_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>

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

std::string local_node_id(const config::Config& config) {
  if (auto host = config.value("SPARK_HOST")) return *host;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace spark::bootstrap
