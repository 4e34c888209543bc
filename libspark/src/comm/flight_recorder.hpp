// SPARK_FLIGHT_RECORDER: this rank's last N operations in shared memory
// (protocol/flight_recorder.hpp has the layout), so that sparkrun can show them while the rank
// runs, is stopped or is dead: `sparkrun status` and the report of a failed job. Under a
// launcher that names the job (SPARK_JOB_ID) the ring is a /dev/shm segment; otherwise it is
// private memory of the process. Written by the communicator's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "spark/protocol/flight_recorder.hpp"

namespace spark {

class FlightRecorder {
 public:
  /// A ring of `capacity` (> 0) operations of world rank `rank`.
  FlightRecorder(const std::string& job_id, int rank, std::uint32_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// A communicator's index for entries (0: the world); the last slot is shared once full.
  std::uint16_t add_comm(std::string_view name) noexcept;

  /// An operation begins (no clock read: see the layout's cost rule).
  void begin(const char* op, std::uint16_t comm, std::uint64_t seq, std::uint64_t bytes,
             std::int32_t peer) noexcept {
    const std::uint64_t n = header_->begun.load(std::memory_order_relaxed);
    protocol::flight::Entry& e = slots_[n % capacity_];
    {
      protocol::flight::WriteGuard g(e);
      e.seq = seq;
      e.bytes = bytes;
      e.start_ns = e.end_ns = e.wait_ns = 0;
      e.peer = peer;
      e.wait_peer = -1;
      e.state = protocol::flight::State::running;
      e.wait_kind = 0;
      e.comm = comm;
      e.waiting = 0;
      e.waits = 0;
      std::size_t i = 0;
      for (; i + 1 < sizeof e.op && op[i] != 0; ++i) e.op[i] = op[i];
      e.op[i] = 0;
      e.lane[0] = 0;
    }
    header_->begun.store(n + 1, std::memory_order_release);
  }
  /// How many operations began: a caller compares before and after to know whether its call
  /// got as far as begin().
  std::uint64_t begun() const noexcept { return header_->begun.load(std::memory_order_relaxed); }
  /// The current operation returned (or threw).
  void end(bool failed) noexcept;
  /// The rank failed: the current operation is marked failed and the segment stays after the
  /// process (sparkrun reads it for the report and removes it with the job's segments).
  void fail_current() noexcept;
  void keep() noexcept { keep_ = true; }
  /// The current operation's wait blocked (first time in that wait): on `peer` (world rank),
  /// its lane, since `since`.
  void wait_blocked(int peer, std::uint8_t kind, std::string_view lane,
                    std::chrono::steady_clock::time_point since) noexcept;
  /// A wait of the current operation ended; `blocked`: it had called wait_blocked.
  void wait_ended(std::chrono::steady_clock::time_point began,
                  std::chrono::steady_clock::time_point ended, bool blocked) noexcept;

 private:
  protocol::flight::Entry& current() noexcept {
    return slots_[(header_->begun.load(std::memory_order_relaxed) - 1) % capacity_];
  }

  std::string name_;  ///< shm_open name; empty: private memory
  bool keep_ = false;
  std::uint32_t capacity_;
  std::size_t bytes_;
  protocol::flight::Header* header_ = nullptr;
  protocol::flight::Entry* slots_ = nullptr;
};

}  // namespace spark
