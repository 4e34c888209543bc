#include "slow_rank.hpp"

#include <cstdio>

namespace spark::launch {

std::vector<std::string> SlowRankWatch::sample(const std::vector<RankFlight>& flights,
                                               const std::map<int, std::string>& host_of) {
  // World collectives (communicator 0) by seq: which peer the blocked waits named, and how
  // long they blocked on it.
  std::map<std::uint64_t, std::map<int, int>> named;
  std::map<std::uint64_t, std::map<int, double>> blocked_s;
  std::uint64_t top = counted_up_to_;
  for (const auto& f : flights) {
    seen_.insert(f.rank);
    for (const auto& op : f.entries) {
      const auto& e = op.e;
      if (e.comm != 0 || e.peer >= 0 || e.seq <= counted_up_to_) continue;  // world collectives
      // Only finished operations: the current one's late rank may still come.
      if (op.state != protocol::flight::State::done) continue;
      top = std::max(top, e.seq);
      if (e.wait_ns == 0 || e.wait_peer < 0) continue;
      ++named[e.seq][e.wait_peer];
      blocked_s[e.seq][e.wait_peer] += static_cast<double>(e.end_ns - e.wait_ns) / 1e9;
    }
  }
  counted_up_to_ = top;
  Sample s;
  for (const auto& [seq, peers] : named) {
    int late = -1, most = 0;
    for (const auto& [peer, n] : peers)
      if (n > most) most = n, late = peer;
    ++s.late[late];
    s.waited_s[late] += blocked_s[seq][late];
    ++s.operations;
  }
  window_.push_back(std::move(s));
  if (static_cast<int>(window_.size()) > kWindowSamples) window_.pop_front();
  std::vector<std::string> warnings;
  if (static_cast<int>(window_.size()) < kWindowSamples) return warnings;
  Sample total;
  for (const auto& w : window_) {
    total.operations += w.operations;
    for (const auto& [r, n] : w.late) total.late[r] += n;
    for (const auto& [r, t] : w.waited_s) total.waited_s[r] += t;
  }
  if (total.operations < 20) return warnings;
  for (const auto& [rank, n] : total.late) {
    // A rank whose own recorder this node does not read (another host's) is not judged: across
    // hosts every wait on a peer includes the wire's latency, so with a rank per host each host
    // saw its rank wait on the other at every collective and named it (both hosts, at 100 %).
    // With its recorder the late rank is one the others wait on while it is itself seen.
    if (!seen_.count(rank) || warned_.count(rank) || n * 10 < total.operations * 9) continue;
    warned_.insert(rank);
    const auto host = host_of.find(rank);
    char line[512];
    std::snprintf(
        line, sizeof line,
        "warning: rank %d%s arrived last at %d%% of %d sampled collectives over the "
        "last %.0f s; the other ranks blocked %.2f s in all waiting for it: its own work is "
        "slow (JIT compilation, a slow or shared core, a throttled node?)",
        rank,
        host != host_of.end() && !host->second.empty() ? (" (host " + host->second + ")").c_str()
                                                       : "",
        n * 100 / total.operations, total.operations,
        kWindowSamples * kSamplePeriod.count() / 1000.0, total.waited_s[rank]);
    warnings.emplace_back(line);
  }
  return warnings;
}

}  // namespace spark::launch
