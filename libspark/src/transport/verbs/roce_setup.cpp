#include "transport/verbs/roce_setup.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "spark/error.hpp"
#include "verbs/verbs_error.hpp"

namespace spark::transport {
using verbs::VerbsError;

namespace {
// `name`'s index in `devices`, appended when it is not there yet.
int index_in(std::vector<std::string>& devices, const std::string& name) {
  auto it = std::find(devices.begin(), devices.end(), name);
  if (it != devices.end()) return static_cast<int>(it - devices.begin());
  devices.push_back(name);
  return static_cast<int>(devices.size() - 1);
}
}  // namespace

VerbsOptions roce_options(VerbsOptions base, const fabric::RoceJob* job, int rank,
                          const std::vector<int>& peers) {
  if (job == nullptr) return base;  // one node: every lane to every peer
  const int me = job->node_of[static_cast<std::size_t>(rank)];
  const auto& mine = job->lanes[static_cast<std::size_t>(me)];
  // Device list: the same-node lanes first (as configured), then what the map adds.
  std::vector<std::string> devices;
  bool local_peer = false;
  for (int r : peers) local_peer = local_peer || job->node_of[static_cast<std::size_t>(r)] == me;
  if (local_peer) {
    if (base.devices.empty())
      for (const auto& l : mine) base.devices.push_back(l.name);
    devices = base.devices;
  }
  auto index_of = [&](const std::string& name) { return index_in(devices, name); };
  std::vector<std::vector<int>> peer_lanes(job->node_of.size());
  std::vector<int> all;
  for (int r : peers) {
    auto& out = peer_lanes[static_cast<std::size_t>(r)];
    if (job->node_of[static_cast<std::size_t>(r)] == me) {
      for (std::size_t d = 0; d < base.devices.size(); ++d) out.push_back(static_cast<int>(d));
      continue;
    }
    const auto choice = job->peer(rank, r);
    if (choice.kind == fabric::RocePeer::Kind::tcp)
      throw ConfigError("RoCE to rank " + std::to_string(r) + ": " +
                        job->describe(rank, r, choice) +
                        "; use SPARK_TRANSPORT=auto (tcp where no RDMA lane reaches a peer)");
    for (const auto& p : choice.pairs)
      out.push_back(index_of(mine[static_cast<std::size_t>(p.local)].name));
    if (choice.kind == fabric::RocePeer::Kind::relay) {
      base.peer_via.resize(job->node_of.size(), -1);
      base.via_host.resize(job->node_of.size());
      base.peer_via[static_cast<std::size_t>(r)] = job->speaker(choice.via);
      base.via_host[static_cast<std::size_t>(r)] = job->hosts[static_cast<std::size_t>(choice.via)];
    }
  }
  base.devices = devices;
  base.peer_lanes = std::move(peer_lanes);
  return base;
}

std::string relay_key(int x, int y) {
  return "spark.roce.relay." + std::to_string(x) + "." + std::to_string(y);
}

std::unique_ptr<VerbsRelay> start_relay(bootstrap::Bootstrap& boot, const fabric::RoceJob& job,
                                        int rank, VerbsOptions base) {
  const int me = job.node_of[static_cast<std::size_t>(rank)];
  if (job.speaker(me) != rank) return nullptr;
  const auto& mine = job.lanes[static_cast<std::size_t>(me)];
  std::vector<std::string> devices;
  auto index_of = [&](const std::string& name) { return index_in(devices, name); };
  std::vector<RelayPair> pairs;
  const int n = static_cast<int>(job.node_of.size());
  for (int x = 0; x < n; ++x)
    for (int y = x + 1; y < n; ++y) {
      if (job.node_of[static_cast<std::size_t>(x)] == job.node_of[static_cast<std::size_t>(y)])
        continue;
      const auto c = job.peer(x, y);
      if (c.kind != fabric::RocePeer::Kind::relay || c.via != me) continue;
      // x's links toward the relay: job.peer(x, y).pairs; ours are their remote ends.
      std::vector<int> xl, yl;
      for (const auto& p : c.pairs)
        xl.push_back(index_of(mine[static_cast<std::size_t>(p.remote)].name));
      for (const auto& p : job.peer(y, x).pairs)
        yl.push_back(index_of(mine[static_cast<std::size_t>(p.remote)].name));
      pairs.push_back({x, y, std::move(xl), std::move(yl)});
    }
  if (pairs.empty()) return nullptr;
  base.devices = devices;
  auto relay = std::make_unique<VerbsRelay>(rank, job.hosts[static_cast<std::size_t>(me)],
                                            std::move(pairs), std::move(base));
  for (std::size_t i = 0; i < relay->pairs().size(); ++i)
    boot.put(relay_key(relay->pairs()[i].x, relay->pairs()[i].y),
             bootstrap::as_bytes(relay->endpoint(i)));
  return relay;
}

void VerbsTransport::connect(const Setup& s, const std::vector<std::string>& endpoints) {
  // A relayed peer's links face the relay: its pair blob stands in for the peer's endpoint.
  std::vector<std::string> eps = endpoints;
  for (int r : peer_ranks_)
    if (const int v = via(r); v >= 0 && s.boot != nullptr)
      eps[static_cast<std::size_t>(r)] =
          bootstrap::to_string(s.boot->get(v, relay_key(std::min(rank_, r), std::max(rank_, r))));
  connect_all(eps);
  if (relay_ != nullptr && s.boot != nullptr)
    for (std::size_t i = 0; i < relay_->pairs().size(); ++i)
      relay_->connect(i, bootstrap::to_string(s.boot->get(relay_->pairs()[i].x, "spark.roce")),
                      bootstrap::to_string(s.boot->get(relay_->pairs()[i].y, "spark.roce")));
  // A write that has not completed within the fail-stop deadline would fail the job at its
  // first message anyway (and Soft-RoCE may never fail a write whose ACKs are lost).
  auto timeout = std::min(s.join, std::chrono::milliseconds(20000));
  if (s.timeout_ms) timeout = std::min(timeout, std::chrono::milliseconds(s.timeout_ms()));
  probe_links(timeout);
  if (relay_ != nullptr) {
    for (const auto& f : relay_->probe(timeout)) {
      const auto& p = relay_->pairs()[static_cast<std::size_t>(f.peer / 2)];
      throw VerbsError("RoCE relay for rank " + std::to_string(p.x) + " <-> rank " +
                       std::to_string(p.y) + ": the RDMA WRITE probe toward rank " +
                       std::to_string(f.peer % 2 == 0 ? p.x : p.y) + " failed: " + f.why);
    }
    relay_->start(s.on_failure, s.timeout_ms);
  }
}

void VerbsTransport::probe_links(std::chrono::milliseconds timeout) {
  auto allowed = timeout;
  auto deadline = std::chrono::steady_clock::now() + allowed;
  auto read_exact = [&](int fd, char* buf, std::size_t n, int peer_rank) {
    std::size_t got = 0;
    while (got < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        throw VerbsError("RoCE probe: rank " + std::to_string(peer_rank) +
                         " did not answer on its liveness connection within " +
                         std::to_string(allowed.count()) + " ms");
      ssize_t k = ::recv(fd, buf + got, n - got, 0);
      if (k <= 0)
        throw VerbsError("RoCE probe: rank " + std::to_string(peer_rank) +
                         " closed its liveness connection during the probe");
      got += static_cast<std::size_t>(k);
    }
  };
  // 1. Ready: our QPs toward each peer are in RTR; the peer's "R" says the same of its own.
  for (int r : peer_ranks_)
    if (peer(r).live_fd >= 0) (void)!::send(peer(r).live_fd, "R", 1, MSG_NOSIGNAL);
  for (int r : peer_ranks_)
    if (peer(r).live_fd >= 0) {
      char c = 0;
      read_exact(peer(r).live_fd, &c, 1, r);
    }
  // 2. One RDMA WRITE per link (up to `timeout`: the peer may have waited as long).
  const auto failed = probe(timeout);
  // A peer whose own probe of a dead link runs its full `timeout` answers that long after a
  // probe of ours that ended at once (3 ranks, one cable without RoCE: ranks on good links gave
  // up on the others' answers just before they came).
  allowed = 2 * timeout;
  deadline = std::chrono::steady_clock::now() + allowed;
  // 3. Per link "1" (ok) or "0" on the liveness connection; a link failed at either end goes.
  for (int r : peer_ranks_) {
    Peer& p = peer(r);
    std::string mine(p.links.size(), '1');
    for (const auto& f : failed)
      if (f.peer == r) mine[static_cast<std::size_t>(f.link)] = '0';
    if (p.live_fd < 0) {
      for (const auto& f : failed)
        if (f.peer == r)
          throw VerbsError(
              "RoCE: the RDMA WRITE probe toward rank " + std::to_string(r) +
              (via(r) >= 0 ? " through the relay rank " + std::to_string(via(r)) : "") +
              " failed: " + f.why + "; check the cables with `sparkrun fabric`");
      continue;
    }
    (void)!::send(p.live_fd, mine.data(), mine.size(), MSG_NOSIGNAL);
    std::string theirs(p.links.size(), '1');
    read_exact(p.live_fd, theirs.data(), theirs.size(), r);
    std::vector<std::pair<std::size_t, std::string>> bad;  // (link, why), the same at both ends
    for (std::size_t k = 0; k < p.links.size(); ++k) {
      if (mine[k] == '1' && theirs[k] == '1') continue;
      std::string why = "rank " + std::to_string(r) + "'s probe toward us failed";
      for (const auto& f : failed)
        if (f.peer == r && f.link == static_cast<int>(k)) why = f.why;
      bad.emplace_back(k, why);
    }
    if (opt_.fall_back && !bad.empty() && bad.size() == p.links.size()) {
      std::string why = "every RDMA WRITE probe failed (";
      for (const auto& [k, w] : bad)
        why += (k == 0 ? "" : "; ") + p.links[k].local.device + ": " + w;
      unreachable_.emplace_back(r, why + ")");
      continue;
    }
    for (const auto& [k, why] : bad) {
      std::fprintf(stderr, "spark: rank %d: RoCE link %zu (%s) to rank %d not used: %s\n", rank_, k,
                   p.links[k].local.device.c_str(), r, why.c_str());
      drop_link(r, static_cast<int>(k), why);
    }
  }
  // Forgotten peers: their QPs go (a completion still queued for them is skipped, as for any
  // rank without a peer entry), and so does the liveness connection; both ends do the same.
  for (const auto& [r, why] : unreachable_) {
    if (peer(r).live_fd >= 0) ::close(peer(r).live_fd);
    peers_[static_cast<std::size_t>(r)].reset();
    peer_ranks_.erase(std::find(peer_ranks_.begin(), peer_ranks_.end(), r));
  }
}

}  // namespace spark::transport
