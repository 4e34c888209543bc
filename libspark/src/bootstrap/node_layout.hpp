// Node identity and the local-rank layout derived from every rank's node id.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace spark::bootstrap {

struct NodeLayout {
  int node_rank = 0;   ///< index of this rank's node, nodes numbered by their lowest rank
  int local_rank = 0;  ///< position among the ranks with the same node id
  int local_size = 1;
};

/// The bootstrap key under which every rank publishes its node id for derive_layout (the
/// bootstraps without a launcher's layout: environment and store rendezvous).
inline constexpr const char* kNodeIdKey = "spark.node_id";

/// node_ids[r] is rank r's node id.
NodeLayout derive_layout(const std::vector<std::string>& node_ids, int rank);

/// SPARK_HOST when set (the launcher's node name: namespaces share hostnames), else hostname.
std::string local_node_id(const config::Config& config);

}  // namespace spark::bootstrap
