#include "slow_lane.hpp"

#include <algorithm>
#include <cstdio>

namespace spark::launch {

namespace {

std::string host_note(const std::map<int, std::string>& host_of, int rank) {
  const auto it = host_of.find(rank);
  return it != host_of.end() && !it->second.empty() ? " (host " + it->second + ")" : "";
}

}  // namespace

std::vector<std::string> SlowLaneWatch::sample(const std::vector<RankFlight>& flights,
                                               const std::map<int, std::string>& host_of) {
  std::vector<std::string> warnings;
  for (const auto& f : flights) {
    auto& window = history_[f.rank];
    window.push_back({f.read_ns, f.lanes});
    if (static_cast<int>(window.size()) > kWindowSamples + 1) window.pop_front();
    if (static_cast<int>(window.size()) <= kWindowSamples) continue;
    const Reading& first = window.front();
    const Reading& last = window.back();
    const double span_s = static_cast<double>(last.ns - first.ns) / 1e9;
    if (span_s <= 0) continue;
    // Per peer: its lanes' rows (rows are only added, so first's rows are last's first rows).
    std::map<int, std::vector<std::size_t>> by_peer;
    for (std::size_t i = 0; i < first.lanes.size() && i < last.lanes.size(); ++i)
      by_peer[last.lanes[i].peer].push_back(i);
    for (const auto& [peer, rows] : by_peer) {
      if (rows.size() < 2) continue;
      auto bytes = [&](std::size_t i) { return last.lanes[i].bytes - first.lanes[i].bytes; };
      auto busy_s = [&](std::size_t i) {
        return static_cast<double>(last.lanes[i].busy_ns - first.lanes[i].busy_ns) / 1e9;
      };
      bool every_lane_carried = true;
      for (const std::size_t i : rows) every_lane_carried = every_lane_carried && bytes(i) > 0;
      if (!every_lane_carried) continue;  // no stream over every lane (small messages keep to one)
      for (const std::size_t slow : rows) {
        const double busy = std::min(busy_s(slow), span_s);
        if (busy < kBusyShare * span_s) continue;
        bool siblings_flow = true;
        for (const std::size_t i : rows)
          if (i != slow && busy_s(i) * 4 > busy) siblings_flow = false;
        if (!siblings_flow) continue;  // the lanes share a bottleneck (the peer, a switch)
        const auto key = std::make_tuple(f.rank, peer, last.lanes[slow].index);
        if (!warned_.insert(key).second) continue;
        std::string siblings;
        for (const std::size_t i : rows) {
          if (i == slow) continue;
          char part[160];
          std::snprintf(part, sizeof part, "%s%s %.1f MB in %.2f s busy, %.1f MB/s",
                        siblings.empty() ? "" : ", ", last.lanes[i].name.c_str(),
                        static_cast<double>(bytes(i)) / 1e6, busy_s(i),
                        static_cast<double>(bytes(i)) / 1e6 / std::max(busy_s(i), 1e-3));
          siblings += part;
        }
        char line[768];
        std::snprintf(
            line, sizeof line,
            "warning: slow lane %s of rank %d%s to rank %d%s: over the last %.0f s it carried "
            "%.1f MB in %.2f s busy (%.0f%%), %.1f MB/s, its sibling lanes to that peer %s: "
            "under a quarter of their rate (a cable or port trained at a lower speed, a "
            "policer, a PCIe half that carries nothing? sparkrun doctor --bandwidth measures "
            "each cable)",
            last.lanes[slow].name.c_str(), f.rank, host_note(host_of, f.rank).c_str(), peer,
            host_note(host_of, peer).c_str(), span_s, static_cast<double>(bytes(slow)) / 1e6, busy,
            100 * busy / span_s, static_cast<double>(bytes(slow)) / 1e6 / busy, siblings.c_str());
        warnings.emplace_back(line);
      }
    }
  }
  return warnings;
}

}  // namespace spark::launch
