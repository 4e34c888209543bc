// tcp's set-up through the Transport interface: its factory, and connect() with the fabric map
// (docs/fabric.md: lanes and the probe port published with the endpoint, speakers probe and
// answer probes, one more fence, the same map on every rank; then serving lanes or relays per
// peer, and the ring of direct links).
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>

#include "bootstrap/bootstrap.hpp"
#include "fabric/probe_protocol.hpp"
#include "log/log.hpp"
#include "spark/error.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace spark::transport {

namespace {
std::string get_string(bootstrap::Bootstrap& b, int rank, const std::string& key) {
  return bootstrap::to_string(b.get(rank, key));
}

int endpoint_port(const std::string& ep, int rank) {
  auto semi = ep.rfind(';');
  int port = 0;
  if (semi == std::string::npos || std::sscanf(ep.c_str() + semi + 1, "%d", &port) != 1)
    throw BootstrapError("tcp transport: malformed endpoint '" + ep + "' of rank " +
                         std::to_string(rank));
  return port;
}

// Steps 2-3 of the map (step 1, publishing lanes and the probe port, rides on the endpoint
// fence; the node's speaker answers probes since then, TcpTransport::answer_probes).
std::unique_ptr<TcpFabric> learn_fabric(bootstrap::Bootstrap& boot, int rank, int size,
                                        const std::vector<std::string>& nodes,
                                        std::chrono::milliseconds join,
                                        const net::hello::Token& token) {
  auto f = std::make_unique<TcpFabric>();
  auto grouped = fabric::group_by_host(nodes);
  f->hosts = std::move(grouped.hosts);
  f->speaker = std::move(grouped.speaker);
  f->node_of = std::move(grouped.node_of);
  for (int r : f->speaker)
    f->lanes.push_back(fabric::decode_lanes(get_string(boot, r, "spark.fabric.lanes")));
  f->ports.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    f->ports[static_cast<std::size_t>(r)] = endpoint_port(get_string(boot, r, "spark.tcp"), r);
  const int n = static_cast<int>(f->hosts.size());
  const int me = f->node_of[static_cast<std::size_t>(rank)];
  const bool speaker = f->speaker[static_cast<std::size_t>(me)] == rank;
  if (speaker) {
    // Every lane of a node is probed at its speaker's one probe listener.
    std::vector<int> probe_port(static_cast<std::size_t>(n));
    for (int b = 0; b < n; ++b) {
      const int r = f->speaker[static_cast<std::size_t>(b)];
      const auto ports = fabric::decode_ports(get_string(boot, r, "spark.fabric.ports"),
                                              "rank " + std::to_string(r));
      if (ports.size() != 1)
        throw BootstrapError("fabric: rank " + std::to_string(r) +
                             " published no probe port (a different libspark version?)");
      probe_port[static_cast<std::size_t>(b)] = ports[0];
    }
    auto port = [&](int b, std::size_t) { return probe_port[static_cast<std::size_t>(b)]; };
    boot.put("spark.fabric.probe",
             bootstrap::as_bytes(fabric::probe_higher(f->lanes, me, port, join, token)));
  }
  boot.commit();
  boot.fence(join);
  std::vector<std::string> published;
  for (int r : f->speaker) published.push_back(get_string(boot, r, "spark.fabric.probe"));
  f->map = fabric::map_from_probes(f->lanes, published);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (f->map.route(a, b).kind == fabric::Route::Kind::unreachable)
        throw BootstrapError("fabric: node " + f->hosts[static_cast<std::size_t>(a)] +
                             " cannot reach node " + f->hosts[static_cast<std::size_t>(b)] +
                             " over SPARK_DATA_NET lanes, not even by relay; map:\n" +
                             f->map.describe(f->hosts, f->lanes) +
                             "check the cables with `sparkrun fabric`");
  return f;
}
}  // namespace

bool learns_fabric_map(const Setup& s) {
  return !s.fallback && !s.one_node() && !s.options->data_net.empty() && !s.options->tcp_addr;
}

std::unique_ptr<Transport> make_tcp(const Setup& s) {
  const CommOptions& c = *s.options;
  TcpOptions o;
  o.lanes = c.tcp_lanes;
  o.slots = c.tcp_slots;
  o.slot_bytes = c.tcp_slot_bytes;
  o.addr = c.tcp_addr;
  o.data_net = c.data_net;
  o.ports = {c.tcp_ports.first, c.tcp_ports.second};
  o.timeout_ms = c.timeout_ms;
  o.token = s.token;
  o.log_dropped = log::enabled(log::Level::info, "tcp");
  auto t = std::make_unique<TcpTransport>(s.rank, s.size, s.peers, o);
  if (learns_fabric_map(s)) {
    s.boot->put("spark.fabric.lanes", bootstrap::as_bytes(fabric::encode_lanes(t->data_lanes())));
    // The node's speaker answers probes from now on (before the endpoint fence: a peer that
    // probes while this rank is still busy with another transport's set-up is answered).
    const auto grouped = fabric::group_by_host(s.nodes);
    const int me = grouped.node_of[static_cast<std::size_t>(s.rank)];
    if (grouped.speaker[static_cast<std::size_t>(me)] == s.rank)
      s.boot->put("spark.fabric.ports", bootstrap::as_bytes(fabric::encode_ports({t->answer_probes(
                                            static_cast<int>(grouped.hosts.size()), me)})));
  }
  return t;
}

int TcpTransport::answer_probes(int nodes, int me) {
  probe_listener_.emplace(0, "the fabric probes", SOCK_NONBLOCK, 64, opt_.ports);
  probe_answerer_.emplace(std::vector<int>{probe_listener_->fd()}, opt_.token, nodes, me);
  return probe_listener_->port();
}

void TcpTransport::connect(const Setup& s, const std::vector<std::string>& endpoints) {
  std::vector<bool> same_node(static_cast<std::size_t>(s.size));
  for (int r = 0; r < s.size; ++r)
    same_node[static_cast<std::size_t>(r)] =
        r != s.rank &&
        s.nodes[static_cast<std::size_t>(r)] == s.nodes[static_cast<std::size_t>(s.rank)];
  std::unique_ptr<TcpFabric> fab;
  if (learns_fabric_map(s)) {
    fab = learn_fabric(*s.boot, s.rank, s.size, s.nodes, s.join, opt_.token);
    probe_answerer_.reset();  // every node has probed (learn_fabric's fence)
    probe_listener_.reset();
    if (!fab->map.fully_connected())
      ring_ = fabric::rank_ring(fabric::ring_order(fab->map), fab->node_of);
  }
  set_relay_failure_handler(s.on_failure);
  set_relay_timeout_source(s.timeout_ms);
  connect_all(endpoints, same_node, s.join, fab.get());
}

}  // namespace spark::transport
