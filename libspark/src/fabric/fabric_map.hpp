// Fabric map (docs/fabric.md): which local lane reaches which peer, learned at start-up.
// Each node publishes its lanes {name, port, IPv4, prefix}; a lane pair serves two nodes
// when both ends sit on one subnet and a probe connection succeeds. Nodes with no common
// lane are reached through a neighbour (relay), chosen by a shortest path so every node
// computes the same routes from the same published data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace spark::fabric {

/// One data lane of a node: an RDMA function or, on tcp, a network interface.
struct Lane {
  std::string name;        ///< e.g. "enp1s0f0np0" or "rocep1s0f0"
  int port = 0;            ///< physical port (0/1 on a Spark); interface index on tcp
  std::uint32_t ipv4 = 0;  ///< host byte order
  int prefix = 32;         ///< subnet prefix length, 0..32
  bool operator==(const Lane&) const = default;
};

/// `s` cut at every `sep`: "a,,b" -> {"a", "", "b"}, "" -> {""}.
std::vector<std::string_view> split(std::string_view s, char sep);
/// Strict dotted-quad parse; throws spark::ConfigError naming `what` on "", "1.2.3", "1.2.3.256".
std::uint32_t parse_ipv4(std::string_view text, std::string_view what);
std::string format_ipv4(std::uint32_t ipv4);
/// "10.1.0.1/30" -> {addr, prefix}; strict.
std::pair<std::uint32_t, int> parse_cidr(std::string_view text, std::string_view what);
std::uint32_t netmask(int prefix);
/// True when a and b sit on one subnet: same prefix, same network, different addresses.
bool same_subnet(const Lane& a, const Lane& b);
/// True when `lane`'s address lies in any of `nets` (CIDRs); an empty list selects all.
bool in_nets(const Lane& lane, const std::vector<std::pair<std::uint32_t, int>>& nets);

/// What a node publishes through the bootstrap: "name,port,ip/prefix;..." (strict decode).
std::string encode_lanes(const std::vector<Lane>& lanes);
std::vector<Lane> decode_lanes(std::string_view text);

/// One usable lane pair between two nodes (indices into each node's lane list).
struct LanePair {
  int local = 0;
  int remote = 0;
  bool operator==(const LanePair&) const = default;
};

struct Route {
  enum class Kind { self, direct, relay, unreachable };
  Kind kind = Kind::unreachable;
  std::vector<LanePair> lanes;  ///< direct: every serving lane pair, in local lane order
  int via = -1;                 ///< relay: the neighbour that forwards (first hop)
  int hops = 0;                 ///< 1 for direct, >1 for relay
};

/// probe(a, lane_a, b, lane_b): a connection from a's lane to b's lane succeeds.
using Probe = std::function<bool(int, int, int, int)>;

class FabricMap {
 public:
  FabricMap() = default;
  explicit FabricMap(std::vector<std::vector<Route>> routes) : routes_(std::move(routes)) {}
  int size() const noexcept { return static_cast<int>(routes_.size()); }
  const Route& route(int from, int to) const;
  /// Every pair of distinct nodes shares a lane (triangle, pair, switch): direct algorithms fit.
  bool fully_connected() const;
  /// Direct neighbours of `node`, ascending.
  std::vector<int> neighbours(int node) const;
  /// A human-readable table, one line per (from, to): "0 -> 2: relay via 1 (2 hops)".
  std::string describe(const std::vector<std::string>& names,
                       const std::vector<std::vector<Lane>>& lanes) const;

 private:
  std::vector<std::vector<Route>> routes_;
};

/// Fills in relay routes for every pair still unreachable in a square route table whose self
/// and direct entries are set: breadth-first over direct links; the first hop is the
/// lowest-numbered neighbour one step closer (the same on every node). Used by build_map and by
/// `sparkrun doctor`, which builds its direct entries from round trips that passed.
void add_relays(std::vector<std::vector<Route>>& routes);

/// Builds the map from every node's lanes. Pure given `probe` (tests pass a predicate;
/// the library passes a real connect). A pair of lanes is probed only when on one subnet.
/// Relays: breadth-first over direct links; ties go to the lowest-numbered neighbour.
FabricMap build_map(const std::vector<std::vector<Lane>>& lanes, const Probe& probe);

/// A cycle through every node over direct links (each node's successor and the last-to-first
/// pair are cabled), starting at node 0 and preferring lower-numbered neighbours, so every node
/// computes the same one. {0} for one node; empty when no such cycle exists (e.g. a line or
/// a star). Ring collectives use it on fabrics that are not fully connected.
std::vector<int> ring_order(const FabricMap& map);
/// The rank ring: nodes in `node_ring` order, each node's ranks ascending (ranks of one node
/// are neighbours, reached through shared memory or loopback). Empty `node_ring`: empty.
std::vector<int> rank_ring(const std::vector<int>& node_ring, const std::vector<int>& node_of);

}  // namespace spark::fabric
