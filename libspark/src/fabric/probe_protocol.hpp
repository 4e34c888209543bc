// The fabric probe protocol ("speaker per host", docs/fabric.md), used by libspark's wire-up
// (tcp data lanes) and spark_fabric_discover; the doctor probe sends its passed links in the
// same list format:
//   1. every rank publishes its host and lanes; one node per distinct host, its first rank
//      speaks for it (group_by_host);
//   2. each speaker probes every same-subnet lane pair toward higher-numbered nodes, a tcp
//      connect bound to its own lane, and publishes the pairs that connected (probe_higher);
//   3. after a fence every rank reads every speaker's list and builds the same map
//      (map_from_probes).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/fabric_map.hpp"

namespace spark::fabric {

/// The wire format of the published lists: "x:y:z;" per entry. Decoding stops at the first
/// entry that is not three integers.
using Triple = std::array<int, 3>;
std::string encode_triples(const std::vector<Triple>& entries);
std::vector<Triple> decode_triples(std::string_view text);

/// The listening ports published with the lanes, one per lane: "p0,p1,...". Decoding is
/// strict (each 1..65535); throws spark::BootstrapError naming `who` otherwise.
std::string encode_ports(const std::vector<int>& ports);
std::vector<int> decode_ports(std::string_view text, std::string_view who);

/// Step 1's grouping of ranks into nodes, in rank order.
struct Nodes {
  std::vector<std::string> hosts;  ///< node -> host
  std::vector<int> speaker;        ///< node -> its first rank
  std::vector<int> node_of;        ///< rank -> node
};
Nodes group_by_host(const std::vector<std::string>& host_of_rank);

/// Step 2 for node `me`: connects from each of its lanes to every same-subnet lane of every
/// higher node (`port(b, j)`: the port listening on node b's lane j), each within
/// min(timeout, 3 s). Returns the list to publish: (b, own lane i, b's lane j) that connected.
std::string probe_higher(const std::vector<std::vector<Lane>>& lanes, int me,
                         const std::function<int(int, std::size_t)>& port,
                         std::chrono::milliseconds timeout);

/// Step 3: the map from every node's lanes and its published list (`published[a]`).
FabricMap map_from_probes(const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& published);

}  // namespace spark::fabric
