// Reads the ranks' flight recorders (protocol/flight_recorder.hpp) from /dev/shm on this node:
// for `sparkrun status` while the job runs, and for the report of a failed job. A rank's
// segment stays readable while it runs, is stopped and after it died (until sparkrun removes
// the job's segments); a rank that ended normally took its segment with it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spark/protocol/flight_recorder.hpp"

namespace spark::launch {

/// One rank's recorder as read at one moment.
struct RankFlight {
  int rank = 0;
  pid_t pid = -1;
  std::uint64_t begun = 0, completed = 0, bytes_done = 0;
  /// Blocked waits per protocol::flight::kWaitBuckets bucket (not cumulative), their time.
  std::vector<std::uint64_t> wait_buckets;
  std::uint64_t wait_sum_ns = 0;
  std::vector<std::string> comms, ops;  ///< the header's name tables
  struct Op {
    protocol::flight::Entry e;
    std::string lane;  ///< of its last blocked wait
    protocol::flight::State state;
  };
  std::vector<Op> entries;  ///< oldest first; the last is the current
  /// The rank's lanes to its peers (protocol::flight::LaneRow): payload bytes sent, blocked
  /// waits' time, busy time.
  struct Lane {
    int peer = -1;
    std::uint32_t index = 0;  ///< among the peer's lanes (the same connection at both ends)
    std::string name;
    std::uint64_t bytes = 0, blocked_ns = 0, busy_ns = 0;
  };
  std::vector<Lane> lanes;
  std::int64_t read_ns = 0;  ///< CLOCK_MONOTONIC of the read
};

/// The recorder of `rank` in job `job_id`, or nullopt when there is none (no libspark rank,
/// SPARK_FLIGHT_RECORDER=0, ended normally).
std::optional<RankFlight> read_flight(const std::string& job_id, int rank);

/// An entry as JSON: op, comm, seq, bytes, peer, state, times (ns since its start, seconds
/// ago), the wait it blocked in.
nlohmann::json entry_json(const RankFlight& f, const RankFlight::Op& op);
/// The lanes as JSON: per lane peer, lane (its name), bytes_sent, blocked_s, busy_s.
nlohmann::json lanes_json(const RankFlight& f);
/// The whole recorder as JSON (rank, pid, counters, entries oldest first).
nlohmann::json flight_json(const RankFlight& f);
/// One line for an entry: "allreduce seq 42 (world) 8.0 KiB: waiting 3.2 s for data from rank
/// 2 on shm".
std::string describe_entry(const RankFlight& f, const RankFlight::Op& op);

/// What the recorders say about who diverged first: the rank that is behind the others on a
/// communicator (its last operation there has a lower seq), and ranks whose operation at the
/// same seq differs from the others'. Empty when every rank agrees.
std::vector<std::string> divergence_notes(const std::vector<RankFlight>& ranks);

}  // namespace spark::launch
