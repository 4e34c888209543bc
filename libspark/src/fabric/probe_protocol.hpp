// The fabric probe protocol ("speaker per host", docs/fabric.md), used by libspark's wire-up
// (tcp data lanes) and spark_fabric_discover; the doctor probe sends its passed links in the
// same list format:
//   1. every rank publishes its host and lanes; one node per distinct host, its first rank
//      speaks for it (group_by_host);
//   2. each speaker probes every same-subnet lane pair toward higher-numbered nodes: a tcp
//      connection bound to its own lane that asks with a probe hello carrying the job's token
//      (net/hello_exchange.hpp); the other node's ProbeAnswerer answers it. It publishes the
//      pairs that were answered (probe_higher): a listener that is not this job's (a stranger
//      on a reused port, another job) is no lane, and a stranger connecting to a node's probe
//      port is dropped without holding up the real probes;
//   3. after a fence every rank reads every speaker's list and builds the same map
//      (map_from_probes).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "net/hello.hpp"
#include "net/socket.hpp"

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
/// The interface MTUs published with the tcp lanes, one per lane, in the same format (each
/// 0..1048576, 0 = unknown).
std::vector<int> decode_mtus(std::string_view text, std::string_view who);

/// Step 1's grouping of ranks into nodes, in rank order.
struct Nodes {
  std::vector<std::string> hosts;  ///< node -> host
  std::vector<int> speaker;        ///< node -> its first rank
  std::vector<int> node_of;        ///< rank -> node
};
Nodes group_by_host(const std::vector<std::string>& host_of_rank);

/// Step 2 for node `me`: probes from each of its lanes every same-subnet lane of every higher
/// node (`port(b, j)`: the port where node b answers probes on its lane j), each within
/// min(timeout, 3 s). Returns the list to publish: (b, own lane i, b's lane j) answered.
std::string probe_higher(const std::vector<std::vector<Lane>>& lanes, int me,
                         const std::function<int(int, std::size_t)>& port,
                         std::chrono::milliseconds timeout, const net::hello::Token& token);

/// One probe: from lane `lane` (`from`) of node `me` to node `to` at ipv4:port, within
/// `timeout`. True when node `to` of this job (`token`, `nodes` nodes) answered; a refused
/// connection or a wrong answer is false (the latter with a line under SPARK_LOG=info:fabric).
bool probe_lane(const Lane& from, int me, int lane, int to, std::uint32_t ipv4, int port,
                std::chrono::milliseconds timeout, const net::hello::Token& token, int nodes);

/// Step 2's answering end for node `me`: a thread that answers this job's probes addressed to
/// `me` on `listeners` (sockets it does not own) until destroyed. Every other connection is
/// dropped with a line under SPARK_LOG=info:fabric. Start it before this node's own probes and
/// destroy it after the fence that follows them (by then every node has probed).
class ProbeAnswerer {
 public:
  ProbeAnswerer(std::vector<int> listeners, const net::hello::Token& token, int nodes, int me);
  ~ProbeAnswerer();
  ProbeAnswerer(const ProbeAnswerer&) = delete;
  ProbeAnswerer& operator=(const ProbeAnswerer&) = delete;

 private:
  void serve();
  std::vector<int> listeners_;
  net::hello::Token token_;
  int nodes_, me_;
  net::Fd stop_;  // an eventfd: written by the destructor
  std::thread thread_;
};

/// Step 3: the map from every node's lanes and its published list (`published[a]`).
FabricMap map_from_probes(const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& published);

}  // namespace spark::fabric
