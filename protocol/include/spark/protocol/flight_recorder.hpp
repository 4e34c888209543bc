// The flight recorder's shared-memory layout: each rank's last N operations, written by the
// rank (libspark, comm/flight_recorder.hpp) and read by sparkrun's node side while the rank
// runs, is stopped or is dead (launcher/src/node/flight_reader.hpp). One segment per rank:
//   /dev/shm/spark-<job id>-flight-r<rank>   (shm_segment::job_prefix, so sparkrun's sweep of
//                                            a job's leftovers removes it too)
// A Header, then `capacity` Entry slots used as a ring. One writer (the rank's thread in the
// communicator), any number of readers: each slot is a seqlock (version odd while written), so
// a reader copies a slot and keeps it only when the version was even and unchanged.
//
// Cost rule: the hot path (an operation that never has to wait) writes one 64-byte entry and
// the counters, never reads a clock (a clock read is 25-115 ns on the development VM, against
// a 1 KiB shm allreduce of ~0.75 us and a 2 % budget). Times come from the wait point, which
// reads the clock anyway: an entry's start is when its first wait began, its end when its
// last wait ended; an operation that never waited has neither.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include "spark/protocol/shm_segment.hpp"

namespace spark::protocol::flight {

inline constexpr char kMagic[8] = {'S', 'P', 'K', 'F', 'L', 'T', '0', '4'};
inline constexpr std::uint32_t kMaxComms = 16;  ///< names kept; later communicators share the last

/// An entry's state, as the reader derives it (the writer stores only `failed`).
enum class State : std::uint8_t { running, done, failed };
inline const char* state_name(State s) {
  return s == State::running ? "running" : s == State::done ? "done" : "failed";
}
/// What a blocked wait waits for (libspark's transport::WaitKind).
inline const char* wait_name(std::uint8_t kind) {
  return kind == 0 ? "data from" : kind == 1 ? "slot at" : "send to";
}

inline constexpr std::uint32_t kMaxOps = 32;  ///< operation names kept; later ones share the last
/// Upper bounds (seconds) of the blocked-wait histogram's buckets; the last bucket is +Inf.
inline constexpr double kWaitBuckets[] = {0.001, 0.01, 0.1, 1, 10, 60};
inline constexpr std::size_t kWaitBucketCount = std::size(kWaitBuckets) + 1;
inline constexpr std::size_t kLaneBytes = 48;
inline constexpr std::uint32_t kMaxLanes = 64;  ///< lane rows kept; later lanes are not counted

/// One operation: one cache line, the fields an operation that never blocks writes in a few
/// wide stores. Times are CLOCK_MONOTONIC nanoseconds (std::chrono::steady_clock), 0: none.
struct Entry {
  std::uint64_t version;   ///< seqlock (through std::atomic_ref): odd while the writer is inside
  std::uint64_t seq;       ///< the communicator's (per-peer for send/recv)
  std::uint64_t bytes;     ///< the caller's buffer size
  std::int64_t start_ns;   ///< its first wait began
  std::int64_t end_ns;     ///< its last wait ended
  std::int64_t wait_ns;    ///< its last blocked wait began (0: none blocked)
  std::int32_t peer;       ///< send/recv peer, broadcast root; -1: every rank
  std::int32_t wait_peer;  ///< world rank of the blocked wait (-1)
  std::uint8_t op;         ///< index into Header::ops
  std::uint8_t failed;     ///< the operation threw, or the rank failed in it
  std::uint8_t waiting;    ///< 1 while its blocked wait lasts
  std::uint8_t wait_kind;  ///< wait_name
  std::uint16_t comm;      ///< index into Header::comms
  std::uint16_t waits;     ///< waits that blocked in this operation (saturates)
};
static_assert(sizeof(Entry) == 64);
static_assert(std::is_trivially_copyable_v<Entry>);

/// One lane of this rank toward one peer (a transport's connection or queue pair; a peer has
/// several on a striped tcp or RDMA path): the payload bytes the rank sent over it, how long its
/// waits blocked on it (for data from the peer or a slot at the peer; a piece after a step's
/// first only) and how long it had data in flight. Counted by the
/// writer with plain adds (one writer); the row's name and peer are written before
/// Header::lane_count covers it. Bytes a collective copied straight between processes (shm's
/// single copy) travel on no lane and are not counted.
struct LaneRow {
  std::atomic<std::uint64_t> bytes;
  std::atomic<std::uint64_t> blocked_ns;  ///< the rank's blocked waits on it (data, slots)
  /// Time it had data in flight (tcp: the kernel's busy time), as of the rank's last blocked
  /// wait (transport::Transport::lane_busy; 0: the transport cannot tell).
  std::atomic<std::uint64_t> busy_ns;
  std::int32_t peer;    ///< world rank
  std::uint32_t index;  ///< the lane's index among the peer's lanes
  char name[32];        ///< "shm", "tcp:1", "tcp:eth1", "mlx5_0"
};
static_assert(sizeof(LaneRow) == 64);

/// The segment: Header, `capacity` Entry slots, then per slot the lane text of its last
/// blocked wait (written only when a wait blocks, under the slot's seqlock), then kMaxLanes
/// LaneRow rows.
struct Header {
  char magic[8];
  std::uint32_t capacity;
  std::int32_t rank;
  std::int32_t pid;
  std::uint32_t comm_count;
  std::atomic<std::uint64_t> begun;       ///< operations begun; the current is (begun-1) % capacity
  std::atomic<std::uint64_t> completed;   ///< operations begun before the last return: the
                                          ///< current one is done when this equals begun
  std::atomic<std::uint64_t> bytes_done;  ///< bytes of those
  std::uint32_t op_count;
  std::atomic<std::uint32_t> lane_count;  ///< LaneRow rows in use (release: rows before it are set)
  char comms[kMaxComms][40];              ///< communicator names ("world", "comm 1 (color 0, ...")
  char ops[kMaxOps][16];                  ///< operation names ("allreduce", "send", ...)
  char reserved[8];
  /// Waits that blocked, by duration (kWaitBuckets; not cumulative), and their total time.
  std::atomic<std::uint64_t> wait_buckets[kWaitBucketCount];
  std::atomic<std::uint64_t> wait_sum_ns;
};
static_assert(sizeof(Header) % 64 == 0);

inline std::size_t segment_bytes(std::uint32_t capacity) {
  return sizeof(Header) + std::size_t{capacity} * (sizeof(Entry) + kLaneBytes) +
         kMaxLanes * sizeof(LaneRow);
}
inline Entry* entries(Header* h) {
  return reinterpret_cast<Entry*>(reinterpret_cast<char*>(h) + sizeof(Header));
}
inline const Entry* entries(const Header* h) {
  return reinterpret_cast<const Entry*>(reinterpret_cast<const char*>(h) + sizeof(Header));
}
inline char* lane_of(Header* h, std::size_t slot) {
  return reinterpret_cast<char*>(entries(h) + h->capacity) + slot * kLaneBytes;
}
inline const char* lane_of(const Header* h, std::size_t slot) {
  return reinterpret_cast<const char*>(entries(h) + h->capacity) + slot * kLaneBytes;
}

inline LaneRow* lane_rows(Header* h) {
  return reinterpret_cast<LaneRow*>(lane_of(h, h->capacity));
}
inline const LaneRow* lane_rows(const Header* h) {
  return reinterpret_cast<const LaneRow*>(lane_of(h, h->capacity));
}

/// The shm_open name of `rank`'s recorder in job `job_id`.
inline std::string segment_name(std::string_view job_id, int rank) {
  return "/" + shm_segment::job_prefix(job_id) + "flight-r" + std::to_string(rank);
}

/// Copies `n` bytes of `text` into a fixed field, always terminated.
template <std::size_t N>
inline void set_text(char (&field)[N], std::string_view text) {
  const std::size_t n = text.size() < N - 1 ? text.size() : N - 1;
  std::memcpy(field, text.data(), n);
  field[n] = 0;
}

/// The writer's side of a slot's seqlock (one writer per segment).
struct WriteGuard {
  explicit WriteGuard(Entry& e) noexcept
      : version_(e.version), v_(version_.load(std::memory_order_relaxed)) {
    version_.store(v_ + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  ~WriteGuard() { version_.store(v_ + 2, std::memory_order_release); }
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;

 private:
  std::atomic_ref<std::uint64_t> version_;
  std::uint64_t v_;
};

/// A consistent copy of slot `slot` and its lane text, or false when the writer kept changing
/// it (after `tries`) or died inside it.
inline bool read_entry(const Header* h, std::size_t slot, Entry& out, char (&lane)[kLaneBytes],
                       int tries = 100) {
  const Entry& e = entries(h)[slot];
  // atomic_ref needs a non-const object; the reader never writes through it.
  std::atomic_ref<std::uint64_t> version(const_cast<std::uint64_t&>(e.version));
  for (int i = 0; i < tries; ++i) {
    const std::uint64_t v1 = version.load(std::memory_order_acquire);
    if (v1 & 1) continue;
    std::memcpy(&out, &e, sizeof(Entry));
    std::memcpy(lane, lane_of(h, slot), kLaneBytes);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version.load(std::memory_order_relaxed) == v1) {
      lane[kLaneBytes - 1] = 0;
      return true;
    }
  }
  return false;
}

}  // namespace spark::protocol::flight
