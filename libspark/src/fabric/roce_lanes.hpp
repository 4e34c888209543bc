// Per-peer RDMA lanes from the fabric map (docs/roce.md, "Which lanes reach which peer").
//
// With SPARK_TRANSPORT=auto (and roce) every rank publishes its node's RDMA functions as map
// lanes (rdma_lanes.hpp) and the lanes it would prefer (SPARK_LANES, the binding plan's choice).
// From the same published data every rank computes, for each pair of ranks on different
// nodes, the same answer:
//   - roce direct: the lane pairs that share a subnet (the cable between the two nodes),
//     matched so that each function is used once per peer: on a Spark port with both PCIe
//     halves cabled that is half A <-> half A and half B <-> half B, and messages stripe over
//     both; restricted to the preferred functions of both ends when those reach the peer, else
//     the map wins (and the report says so);
//   - roce relay: no common subnet, but the map reaches the peer through a neighbour;
//   - tcp: no RDMA lane reaches the peer at all, with the reason for the note.
// The choice is symmetric: pair(a -> b) is pair(b -> a) with local and remote swapped, so both
// ends open their links in the same order. A lane pair is still only a candidate: the
// transport probes every chosen pair with an RDMA WRITE before it carries data.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "fabric/rdma_lanes.hpp"

namespace spark::fabric {

/// How one rank reaches one peer on another node.
struct RocePeer {
  enum class Kind { roce, relay, tcp };
  Kind kind = Kind::tcp;
  std::vector<LanePair> pairs;  ///< roce: chosen (local, remote) lane indices, in link order
  int via = -1;                 ///< relay: the node that forwards (Route::via); pairs: toward it
  bool map_won = false;         ///< the preferred lanes did not reach the peer: the map chose
  std::string note;             ///< tcp: why; map_won: which preference was overruled
};

/// The map over RDMA lanes: lane pairs that share a subnet (no tcp probe; the transport's RDMA
/// WRITE probe decides), plus relay routes. `lanes[node]` are RDMA lanes (empty: none).
FabricMap rdma_candidate_map(const std::vector<std::vector<Lane>>& lanes);

/// A matching over a route's lane pairs: taken in order, a pair is kept when neither its local
/// nor its remote lane is used yet. Symmetric (route(b, a) gives the mirrored pairs).
std::vector<LanePair> match_lane_pairs(const std::vector<LanePair>& pairs);

/// The choice for (node a, preferred lane names of the rank on a) -> (node b, preferences of
/// the rank on b). `names` are node names for the notes. Preferences name lanes by device;
/// empty: no preference.
RocePeer choose_roce_peer(const FabricMap& map, const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& names, int a, int b,
                          const std::vector<std::string>& prefer_a,
                          const std::vector<std::string>& prefer_b);

/// One report line: "spark1 -> spark3: roce rocep1s0f1(10.0.1.1)->rocep1s0f0(10.0.1.2) ..."
/// or "spark1 -> spark3: tcp, no RDMA lane of spark1 shares a subnet with spark3".
std::string describe_roce_peer(const RocePeer& p, const std::vector<std::vector<Lane>>& lanes,
                               const std::vector<std::string>& names, int a, int b);

/// What every rank knows after the wire-up's first fence (identical on every rank): each
/// rank's host, its node's RDMA lanes and its preferred devices, all as published.
struct RoceJob {
  std::vector<std::string> hosts;                ///< node names, in order of first rank
  std::vector<int> node_of;                      ///< rank -> node
  std::vector<std::vector<Lane>> lanes;          ///< node -> RDMA lanes (its first rank's)
  std::vector<std::vector<std::string>> prefer;  ///< rank -> preferred devices (SPARK_LANES)
  FabricMap map;                                 ///< rdma_candidate_map(lanes)

  /// Some pair of nodes has an RDMA route (direct or relay).
  bool any_roce() const;
  /// choose_roce_peer between the nodes of two ranks (on different nodes); for a relay, the
  /// pairs are those toward the relaying node (its first rank's preferences).
  RocePeer peer(int from_rank, int to_rank) const;
  /// The first rank of `node`: it speaks for the node and runs its relay.
  int speaker(int node) const;
  std::string describe(int from_rank, int to_rank, const RocePeer& choice) const;
  /// With SPARK_DATA_NET the tcp transport learns its own map of the data lanes and plans it
  /// as if every node pair were on tcp: every node takes that map's fence, and a relaying node
  /// awaits every pair routed through it (transport/tcp/tcp_setup.cpp). In a job that mixes
  /// roce and tcp that plan holds only when every node has a tcp peer and no roce pair is
  /// relayed; else why not, naming the nodes. "" when it holds or the job does not mix.
  std::string mixed_tcp_map_problem() const;
};

/// What one rank publishes for the choice (a job's wire-up and `sparkrun doctor` alike): its
/// node's RDMA lanes, restricted by SPARK_IB_HCA (`ib_hca`) and SPARK_DATA_NET (`data_net`),
/// encoded (encode_lanes), and its preferred devices (SPARK_LANES, `prefer`), comma-separated.
/// Strict: a malformed value or a named device that is no lane throws spark::ConfigError.
struct RoceFacts {
  std::string lanes;
  std::string prefer;
};
RoceFacts local_roce_facts(const std::optional<std::string>& ib_hca, std::string_view data_net,
                           const std::optional<std::string>& prefer,
                           std::string_view ib_root = kSysfsInfinibandClass);

/// Builds the job view from what every rank published: `rank_hosts[r]`, `rank_lanes[r]`
/// (encode_lanes of its node's RDMA lanes) and `rank_prefer[r]` (comma-separated devices,
/// "" for none). Strict: malformed lanes throw spark::ConfigError.
RoceJob make_roce_job(const std::vector<std::string>& rank_hosts,
                      const std::vector<std::string>& rank_lanes,
                      const std::vector<std::string>& rank_prefer);

}  // namespace spark::fabric
