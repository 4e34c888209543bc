// RoCE set-up across nodes (docs/roce.md, "RDMA lanes per peer", "Relay on RoCE"): each peer's
// links from the job's per-peer lane choice (roce_choice.hpp), and the relay a node's first
// rank runs for the pairs the map sends through it. Used by make_roce.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "fabric/roce_lanes.hpp"
#include "transport/verbs/verbs_relay.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace spark::transport {

/// Which local devices the links toward each peer use: for peers on other nodes the lanes
/// `job` chose (RocePeer::pairs, in link order; toward the relaying rank for a relayed peer);
/// for peers on this node (SPARK_TRANSPORT=roce) every lane of `base.devices`, lane i to i.
/// Throws ConfigError for a peer no RDMA lane reaches (forced roce).
VerbsOptions roce_options(VerbsOptions base, const fabric::RoceJob* job, int rank,
                          const std::vector<int>& peers);

/// The bootstrap key of the relay's blob for the pair x < y.
std::string relay_key(int x, int y);

/// The relay this rank runs for the pairs whose route goes through its node (it is the node's
/// first rank), or null; puts each pair's blob under relay_key. The caller commits.
std::unique_ptr<VerbsRelay> start_relay(bootstrap::Bootstrap& boot, const fabric::RoceJob& job,
                                        int rank, VerbsOptions base);

}  // namespace spark::transport
