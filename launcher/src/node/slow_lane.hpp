// The slow-lane warning (never fatal): one lane of a rank's striped path to a peer (tcp
// connections, RDMA queue pairs, one per cable or PCIe half) that runs at under a quarter of
// its sibling lanes' rate, seen in the ranks' flight recorders (per-lane bytes sent and
// blocked-wait time, protocol/flight_recorder.hpp).
//
// Striping hands whole pieces to a peer's lanes in turn, so every lane carries the same bytes
// and the slowest sets the pace: a lane's rate is its bytes over the time it had data in
// flight (its busy time; tcp: the kernel's). Over a window of kWindowSamples, a lane busy at
// least 3/4 of it whose siblings to that peer were busy at most a quarter of its time, every
// lane having carried bytes, runs at under a quarter of their rate and is named. (Waits on a
// lane are no such measure: a rank waits for a piece its peer could not send yet because the
// peer waits on the slow lane, which puts the wait on whichever lane that piece takes.)
// Each lane (rank, peer, lane index) is named once per job; the other end's daemon looks at
// its own rank's side.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "flight_reader.hpp"

namespace spark::launch {

class SlowLaneWatch {
 public:
  static constexpr int kWindowSamples = 15;  ///< 3 s at SlowRankWatch::kSamplePeriod
  static constexpr double kBusyShare = 0.75;
  /// Reads one sample (every rank of this node, at the slow-rank watch's period); returns the
  /// warnings to print now (without "sparkrun: "). `host_of(rank)`: its host or "".
  std::vector<std::string> sample(const std::vector<RankFlight>& flights,
                                  const std::map<int, std::string>& host_of);

 private:
  struct Reading {
    std::int64_t ns = 0;
    std::vector<RankFlight::Lane> lanes;
  };
  std::map<int, std::deque<Reading>> history_;            ///< per rank, the window's readings
  std::set<std::tuple<int, int, std::uint32_t>> warned_;  ///< rank, peer, lane index
};

}  // namespace spark::launch
