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
#include <vector>

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

  /// A lane row: no row (the table is full, no such lane).
  static constexpr std::uint32_t kNoRow = ~std::uint32_t{0};
  /// The lanes to world rank `peer`, by the transport's lane index (at wire-up).
  void add_lanes(int peer, const std::vector<std::string>& names);
  /// The row of `peer`'s lane that `lane_index()` names; asked only when the peer has several.
  template <class LaneIndex>
  std::uint32_t lane_row(int peer, LaneIndex&& lane_index) const noexcept {
    if (static_cast<std::size_t>(peer) >= lanes_.size()) return kNoRow;
    const PeerLanes l = lanes_[static_cast<std::size_t>(peer)];
    if (l.count <= 1) return l.count == 1 ? l.first : kNoRow;
    const std::size_t i = lane_index();
    return i < l.count ? l.first + static_cast<std::uint32_t>(i) : kNoRow;
  }
  /// `bytes` of payload went out on lane row `row` (one writer: a plain add, no locked
  /// instruction on the hot path).
  void sent(std::uint32_t row, std::uint64_t bytes) noexcept {
    if (row == kNoRow) return;
    auto& b = lane_rows_[row].bytes;
    b.store(b.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  }

  /// Copies every lane's busy time, `busy(peer, lane index)` (std::chrono::nanoseconds), into
  /// its row, at most every kBusyRefresh (system calls: on a blocked wait only).
  static constexpr std::chrono::milliseconds kBusyRefresh{100};
  template <class Busy>
  void refresh_busy(std::chrono::steady_clock::time_point now, Busy&& busy) noexcept {
    if (now - busy_refreshed_ < kBusyRefresh) return;
    busy_refreshed_ = now;
    for (std::size_t peer = 0; peer < lanes_.size(); ++peer)
      for (std::uint32_t i = 0; i < lanes_[peer].count; ++i)
        lane_rows_[lanes_[peer].first + i].busy_ns.store(
            static_cast<std::uint64_t>(busy(static_cast<int>(peer), i).count()),
            std::memory_order_relaxed);
  }

  /// An operation begins (no clock read: see the layout's cost rule).
  void begin(const char* op, std::uint16_t comm, std::uint64_t seq, std::uint64_t bytes,
             std::int32_t peer) noexcept {
    const std::uint8_t op_index = op == last_op_ ? last_op_index_ : op_index_of(op);
    // The writer's state in locals, written back at the end: stores into the shared slot may
    // alias anything and would make the compiler reload every member after each.
    const std::uint32_t slot = next_;
    protocol::flight::Entry& e = slots_[slot];
    const std::uint64_t begun = begun_ + 1;
    {
      protocol::flight::WriteGuard g(e);
      e.seq = seq;
      e.bytes = bytes;
      e.start_ns = e.end_ns = e.wait_ns = 0;
      e.peer = peer;
      e.wait_peer = -1;
      e.op = op_index;
      e.failed = 0;
      e.waiting = 0;
      e.wait_kind = 0;
      e.comm = comm;
      e.waits = 0;
    }
    header_->begun.store(begun, std::memory_order_release);
    next_ = slot + 1 == capacity_ ? 0 : slot + 1;  // no division on the hot path
    current_ = &e;
    begun_ = begun;
  }
  /// How many operations began: a caller compares before and after to know whether its call
  /// got as far as begin().
  std::uint64_t begun() const noexcept { return begun_; }
  /// The current operation returned (or threw).
  void end(bool failed) noexcept {
    // The reader takes "done" from the counter; only a failure is written into the slot.
    // Every operation begun so far has ended: operations begun outside a public call (init's
    // barrier) have no end() of their own.
    if (failed) fail_current();
    bytes_done_ += current_->bytes;
    completed_ = begun_;
    header_->completed.store(completed_, std::memory_order_relaxed);
    header_->bytes_done.store(bytes_done_, std::memory_order_relaxed);
  }
  /// The rank failed: the current operation is marked failed and the segment stays after the
  /// process (sparkrun reads it for the report and removes it with the job's segments).
  void fail_current() noexcept;
  void keep() noexcept { keep_ = true; }
  /// The current operation's wait blocked (first time in that wait): on `peer` (world rank),
  /// its lane (name, and row for the lane's blocked time), since `since`.
  void wait_blocked(int peer, std::uint8_t kind, std::string_view lane, std::uint32_t lane_row,
                    std::chrono::steady_clock::time_point since) noexcept;
  /// A wait of the current operation ended; `blocked`: it had called wait_blocked.
  void wait_ended(std::chrono::steady_clock::time_point began,
                  std::chrono::steady_clock::time_point ended, bool blocked) noexcept {
    if (current_ == nullptr) return;
    if (blocked) return wait_unblocked(ended);
    // Two 8-byte stores of their own: the common wait (it ended while spinning) pays no
    // seqlock round.
    if (current_->start_ns == 0)
      std::atomic_ref<std::int64_t>(current_->start_ns)
          .store(std::chrono::nanoseconds(began.time_since_epoch()).count(),
                 std::memory_order_relaxed);
    std::atomic_ref<std::int64_t>(current_->end_ns)
        .store(std::chrono::nanoseconds(ended.time_since_epoch()).count(),
               std::memory_order_relaxed);
  }

 private:
  void wait_unblocked(std::chrono::steady_clock::time_point ended) noexcept;
  /// The index of an operation name in the header's table (added when new).
  std::uint8_t op_index_of(const char* op) noexcept;

  std::string name_;  ///< shm_open name; empty: private memory
  bool keep_ = false;
  std::uint32_t capacity_;
  std::size_t bytes_;
  protocol::flight::Header* header_ = nullptr;
  protocol::flight::Entry* slots_ = nullptr;
  protocol::flight::LaneRow* lane_rows_ = nullptr;
  struct PeerLanes {
    std::uint32_t first = kNoRow, count = 0;
  };
  std::vector<PeerLanes> lanes_;        ///< by world rank
  std::uint32_t blocked_row_ = kNoRow;  ///< the lane row of the blocked wait in progress
  std::chrono::steady_clock::time_point busy_refreshed_{};
  // The writer's own copies (the shared header is only written).
  std::vector<const char*> op_names_;  ///< the literals of Header::ops, by index
  const char* last_op_ = nullptr;      ///< the previous operation's name and its index
  std::uint8_t last_op_index_ = 0;
  std::uint32_t next_ = 0;  ///< the slot the next operation takes
  protocol::flight::Entry* current_ = nullptr;
  std::uint64_t begun_ = 0, completed_ = 0, bytes_done_ = 0;
};

}  // namespace spark
