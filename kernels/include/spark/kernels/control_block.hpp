// The control block: one per communicator, in pinned host memory mapped into the GPU's
// address space, so that the host and every kernel (also kernels replayed from a CUDA graph
// captured long ago) see the same current timeout and the same failure state.
#pragma once

#include <cstdint>
#include <thread>

#include "spark/failure_record.h"
#include "spark/kernels/hd.hpp"

namespace spark::kernels {

inline constexpr std::uint32_t kMaxLanes = 4;
inline constexpr std::uint32_t kLaneNameSize = 32;

/// The fail-stop record as the kernels write it: the C layout of spark/failure_record.h, which
/// spark::FailureRecord shares (libspark memcpy()s it; failure.hpp asserts every offset).
using FailureRecordData = spark_failure_record;

/// Values of FailureRecordData::cause (spark::FailureCause).
inline constexpr std::uint8_t kCauseTimeout = SPARK_CAUSE_TIMEOUT;
inline constexpr std::uint8_t kCausePeerClosed = SPARK_CAUSE_PEER_CLOSED;
inline constexpr std::uint8_t kCausePeerError = SPARK_CAUSE_PEER_ERROR;
inline constexpr std::uint8_t kCauseRemoteAbort = SPARK_CAUSE_REMOTE_ABORT;
inline constexpr std::uint8_t kCauseMismatch = SPARK_CAUSE_MISMATCH;

/// ControlBlock::state. A writer claims healthy -> writing with a CAS, fills the record and
/// publishes failed with a release store; readers trust the record only in state failed.
inline constexpr std::uint32_t kStateHealthy = 0;
inline constexpr std::uint32_t kStateWriting = 1;
inline constexpr std::uint32_t kStateFailed = 2;

struct ControlBlock {
  std::uint32_t timeout_ms;  ///< read by every wait on every iteration (set_timeout_ms)
  std::uint32_t state;       ///< kStateHealthy / kStateWriting / kStateFailed
  std::int32_t rank;         ///< this rank, copied into records
  std::uint32_t lane_count;
  /// Extra time GPU waits allow on top of timeout_ms when a host proxy, which knows better
  /// which peer is missing, waits for the same data with timeout_ms: its record should win,
  /// the GPU's wait stays the backstop (proxy stuck or gone). 0 when the GPU waits alone.
  std::uint32_t grace_ms;
  std::uint32_t reserved;
  std::uint64_t device_seq;  ///< last sequence number a device collective completed
  char lane_names[kMaxLanes][kLaneNameSize];  ///< "tcp:0", "rocep1s0f0", ...
  FailureRecordData record;                   ///< valid when state == kStateFailed
};

/// Sets up a fresh control block (host side, before any kernel runs).
inline void init_control_block(ControlBlock* ctl, std::int32_t rank, std::uint32_t timeout_ms) {
  *ctl = ControlBlock{};
  ctl->timeout_ms = timeout_ms;
  ctl->rank = rank;
  ctl->record.rank = -1;
  ctl->record.peer = -1;
}

SPARK_HD inline bool is_failed(const ControlBlock* ctl) {
  return load_acquire(&ctl->state) != kStateHealthy;
}

/// For CPU readers: the record once its writer has published it (state failed), nullptr while
/// the communicator is healthy. A writer that has claimed it (state writing) finishes within
/// microseconds; reading before the release of kStateFailed would see a half-written record.
inline const FailureRecordData* published_record(const ControlBlock* ctl) {
  std::uint32_t state;
  while ((state = load_acquire(&ctl->state)) == kStateWriting) std::this_thread::yield();
  return state == kStateFailed ? &ctl->record : nullptr;
}

/// Takes effect at the next iteration of every wait, on the host and on the GPU.
inline void set_timeout_ms(ControlBlock* ctl, std::uint32_t ms) {
  __atomic_store_n(&ctl->timeout_ms, ms, __ATOMIC_RELEASE);
}

/// What a failure is about; everything except the timing, which the writer measured.
struct FailureSite {
  std::int32_t peer = -1;
  std::uint32_t lane = 0;
  std::uint64_t seq = 0;
  std::uint32_t step = 0;
  const char* op = "";
  const char* detail = "";
  const char* lane_name = nullptr;  ///< overrides the control block's name of `lane`
};

/// Writes the record and marks the communicator failed. Returns false when another writer
/// (another GPU thread, the host proxy) got there first: the first record stands.
SPARK_HD inline bool record_failure(ControlBlock* ctl, const FailureSite& site, std::uint8_t cause,
                                    std::uint32_t waited_ms, std::uint32_t timeout_ms,
                                    std::int64_t time_unix_ns) {
  if (!compare_exchange(&ctl->state, kStateHealthy, kStateWriting)) return false;
  FailureRecordData& r = ctl->record;
  r.rank = ctl->rank;
  r.peer = site.peer;
  r.seq = site.seq;
  r.step = site.step;
  r.waited_ms = waited_ms;
  r.timeout_ms = timeout_ms;
  r.cause = cause;
  r.time_unix_ns = time_unix_ns;
  if (site.lane_name != nullptr) {
    copy_cstr(r.lane, sizeof r.lane, site.lane_name);
  } else if (site.lane < kMaxLanes && site.lane < ctl->lane_count &&
             ctl->lane_names[site.lane][0] != 0) {
    copy_cstr(r.lane, sizeof r.lane, ctl->lane_names[site.lane]);
  } else {
    // "lane N" without snprintf (not available on the device).
    char name[16] = {'l', 'a', 'n', 'e', ' '};
    std::uint32_t v = site.lane, n = 5;
    char digits[12];
    std::uint32_t d = 0;
    do {
      digits[d++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0 && d < sizeof digits);
    while (d > 0) name[n++] = digits[--d];
    name[n] = '\0';
    copy_cstr(r.lane, sizeof r.lane, name);
  }
  copy_cstr(r.op, sizeof r.op, site.op);
  copy_cstr(r.detail, sizeof r.detail, site.detail);
  store_release(&ctl->state, kStateFailed);
  return true;
}

}  // namespace spark::kernels
