// Transport wire-up: publish node identity, pick a transport per peer (shm on the same node,
// tcp otherwise, SPARK_TRANSPORT forces one), publish endpoints, connect, then a CPU-side
// barrier so that every rank is connected before init() returns.
//
// Fabric map (docs/fabric.md): when ranks span several hosts, tcp carries the data and
// SPARK_DATA_NET names the data subnets, every rank publishes its data lanes with its tcp
// endpoint; the first rank of each host probes the same-subnet lane pairs toward higher
// nodes (a connect bound to its lane, to the peer's tcp listener) and publishes what worked;
// after one more fence every rank builds the same map (fabric::build_map). The tcp transport
// then connects each peer over its serving lanes or through a relay, and the collectives
// pick their algorithms from the map (ring_ below).
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "comm/communicator_impl.hpp"
#include "fabric/probe_protocol.hpp"
#include "spark/error.hpp"
#include "transport/shm/shm_transport.hpp"
#include "transport/tcp/tcp_transport.hpp"
#ifdef SPARK_HAVE_VERBS
#include "transport/verbs/verbs_wireup.hpp"
#endif

namespace spark {

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

// Steps 2-3 of the map (step 1, publishing lanes, rides on the endpoint fence).
std::unique_ptr<transport::TcpFabric> learn_fabric(bootstrap::Bootstrap& boot, int rank, int size,
                                                   const std::vector<std::string>& nodes,
                                                   std::chrono::milliseconds join) {
  auto f = std::make_unique<transport::TcpFabric>();
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
  if (f->speaker[static_cast<std::size_t>(me)] == rank) {
    // Every lane of a node is served by its speaker's one tcp listener.
    auto port = [&](int b, std::size_t) {
      return f->ports[static_cast<std::size_t>(f->speaker[static_cast<std::size_t>(b)])];
    };
    boot.put("spark.fabric.probe",
             bootstrap::as_bytes(fabric::probe_higher(f->lanes, me, port, join)));
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

void CommunicatorImpl::wire_up() {
  rank_ = boot_->rank();
  size_ = boot_->size();
  local_rank_ = boot_->local_rank();
  local_size_ = boot_->local_size();
  node_id_ = boot_->node_id();
  by_peer_.assign(static_cast<std::size_t>(size_), nullptr);
  p2p_send_seq_.assign(static_cast<std::size_t>(size_), 0);
  p2p_recv_seq_.assign(static_cast<std::size_t>(size_), 0);
  if (options_.spin_auto) {
    // A CPU to spare per rank: poll longer before blocking (RDMA writes raise no event, so a
    // roce wait that blocks sleeps in slices). Oversubscribed: polling steals the peer's CPU
    // (docs/collectives.md, "1 KiB" figures on the 2-core VM).
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    options_.spin_us = cpus > local_size_ ? 50 : 5;
  }
#ifndef SPARK_HAVE_VERBS
  if (options_.transport == config::Transport::roce)
    throw ConfigError(
        "SPARK_TRANSPORT=roce: this libspark was built without ibverbs (install libibverbs-dev and "
        "rebuild); use SPARK_TRANSPORT=auto, tcp or shm");
#endif
  if (size_ == 1) return;

  const std::chrono::milliseconds join(options_.join_timeout_ms);
  boot_->put("spark.node", bootstrap::as_bytes(node_id_));
  boot_->commit();
  boot_->fence(join);
  std::vector<std::string> nodes(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r)
    nodes[static_cast<std::size_t>(r)] = get_string(*boot_, r, "spark.node");

  // The allreduce crossover (one-shot up to this size, docs/collectives.md) must be the same
  // on every rank, so it depends only on what every rank knows: the node ids and the knob.
  const bool one_node =
      std::all_of(nodes.begin(), nodes.end(), [&](const std::string& n) { return n == nodes[0]; });
  const bool network = options_.transport == config::Transport::tcp ||
                       options_.transport == config::Transport::roce ||
                       (options_.transport == config::Transport::auto_select && !one_node);
  one_shot_max_ = network ? (size_ == 2 ? 256 * 1024 : 32 * 1024) : 16 * 1024;

  std::vector<int> shm_peers, tcp_peers, roce_peers;
  std::vector<bool> same_node(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const bool same = nodes[static_cast<std::size_t>(r)] == node_id_;
    same_node[static_cast<std::size_t>(r)] = same;
    switch (options_.transport) {
      case config::Transport::shm:
        if (!same)
          throw ConfigError("SPARK_TRANSPORT=shm, but rank " + std::to_string(r) + " is on node '" +
                            nodes[static_cast<std::size_t>(r)] + "' and rank " +
                            std::to_string(rank_) + " on '" + node_id_ +
                            "': shared memory only reaches ranks of the same node; "
                            "use SPARK_TRANSPORT=auto");
        shm_peers.push_back(r);
        break;
      case config::Transport::tcp:
        tcp_peers.push_back(r);
        break;
      case config::Transport::roce:
        roce_peers.push_back(r);
        break;
      default:
        (same ? shm_peers : tcp_peers).push_back(r);
    }
  }

  transport::ShmTransport* shm = nullptr;
  transport::TcpTransport* tcp = nullptr;
  if (!shm_peers.empty()) {
    std::vector<int> node_ranks = shm_peers;
    node_ranks.push_back(rank_);
    std::sort(node_ranks.begin(), node_ranks.end());
    auto t = std::make_unique<transport::ShmTransport>(
        rank_, size_, node_ranks, options_.job_id.empty() ? "job" : options_.job_id, node_id_,
        transport::ShmOptions{options_.slots, options_.shm_slot_bytes});
    shm = t.get();
    boot_->put("spark.shm", bootstrap::as_bytes(shm->endpoint()));
    transports_.push_back(std::move(t));
  }
  if (!tcp_peers.empty()) {
    transport::TcpOptions o;
    o.lanes = options_.tcp_lanes;
    o.slots = options_.slots;
    o.slot_bytes = options_.tcp_slot_bytes;
    o.addr = options_.tcp_addr;
    o.data_net = options_.data_net;
    o.timeout_ms = options_.timeout_ms;
    auto t = std::make_unique<transport::TcpTransport>(rank_, size_, tcp_peers, o);
    tcp = t.get();
    boot_->put("spark.tcp", bootstrap::as_bytes(tcp->endpoint()));
    if (!one_node && !options_.data_net.empty() && !options_.tcp_addr)
      boot_->put("spark.fabric.lanes",
                 bootstrap::as_bytes(fabric::encode_lanes(tcp->data_lanes())));
    transports_.push_back(std::move(t));
  }
#ifdef SPARK_HAVE_VERBS
  transport::VerbsTransport* roce = nullptr;
  if (!roce_peers.empty()) {
    auto t =
        transport::start_roce(*boot_, rank_, size_, roce_peers, options_.timeout_ms, options_.slots,
                              options_.tcp_slot_bytes);  // puts "spark.roce"
    roce = t.get();
    transports_.push_back(std::move(t));
  }
#endif
  boot_->commit();
  boot_->fence(join);

  piece_ = SIZE_MAX;
#ifdef SPARK_HAVE_VERBS
  if (roce != nullptr) {
    transport::finish_roce(*boot_, *roce, roce_peers);
    for (int r : roce_peers) by_peer_[static_cast<std::size_t>(r)] = roce;
    piece_ = std::min(piece_, roce->slot_bytes());
  }
#endif
  if (shm != nullptr) {
    for (int r : shm_peers) {
      shm->attach(r, get_string(*boot_, r, "spark.shm"));
      by_peer_[static_cast<std::size_t>(r)] = shm;
    }
    piece_ = std::min(piece_, shm->slot_bytes());
  }
  if (tcp != nullptr) {
    std::vector<std::string> endpoints(static_cast<std::size_t>(size_));
    for (int r : tcp_peers) {
      endpoints[static_cast<std::size_t>(r)] = get_string(*boot_, r, "spark.tcp");
      by_peer_[static_cast<std::size_t>(r)] = tcp;
    }
    std::unique_ptr<transport::TcpFabric> fab;
    if (!one_node && !options_.data_net.empty() && !options_.tcp_addr) {
      fab = learn_fabric(*boot_, rank_, size_, nodes, join);
      if (!fab->map.fully_connected())
        ring_ = fabric::rank_ring(fabric::ring_order(fab->map), fab->node_of);
    }
    tcp->set_relay_failure_handler([this](const FailureRecord& r) { fail_external(r); });
    tcp->set_relay_timeout_source([this] { return timeout_ms_.load(std::memory_order_relaxed); });
    tcp->connect_all(endpoints, same_node, join, fab.get());
    piece_ = std::min(piece_, tcp->slot_bytes());
  }
  max_piece_ = piece_;
  // Every rank connected (and every shm segment mapped) before init returns.
  barrier();
  if (shm != nullptr) shm->unlink();
}

}  // namespace spark
