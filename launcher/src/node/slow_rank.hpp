// The slow-rank warning (never fatal): a rank that arrives last at nearly every collective,
// seen in the ranks' flight recorders. An operation's late rank is the peer that the other
// ranks' blocked waits name; operations where nobody blocked say nothing. sample() is fed
// every kSamplePeriod; a rank that is the late one at >= 90 % of at least 20 sampled
// operations over the last kWindow gets one warning for the job. Time-slicing of ranks that
// share CPUs makes a different rank late every few milliseconds: a window of many samples
// keeps that from reading as one slow rank. Only ranks of this node are named (a node reads
// its own ranks' recorders): another host's rank is late to them by the wire's latency alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "flight_reader.hpp"

namespace spark::launch {

class SlowRankWatch {
 public:
  static constexpr std::chrono::milliseconds kSamplePeriod{200};
  static constexpr int kWindowSamples = 15;  ///< 3 s
  /// Reads one sample (every rank of this node); returns the warnings to print now (without
  /// "sparkrun: "), each rank at most once per job. `host_of(rank)`: its host or "".
  std::vector<std::string> sample(const std::vector<RankFlight>& flights,
                                  const std::map<int, std::string>& host_of);

 private:
  struct Sample {
    std::map<int, int> late;         ///< rank -> operations it was late at
    std::map<int, double> waited_s;  ///< rank -> seconds others blocked on it
    int operations = 0;              ///< operations with a late rank
  };
  std::deque<Sample> window_;
  std::uint64_t counted_up_to_ = 0;  ///< the world's seqs already counted
  std::set<int> warned_;
  std::set<int> seen_;  ///< ranks whose recorders this node reads (its own)
};

}  // namespace spark::launch
