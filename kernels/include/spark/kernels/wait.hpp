// The one timed wait on a peer's sequence flag, written once for the GPU and the host.
//
// A Clock provides:  now_ns()  monotonic nanoseconds (%globaltimer on the GPU, steady_clock on
// the host, a scripted clock in tests); unix_ns()  wall-clock time for the record; relax()
// what to do between polls (__nanosleep on the GPU, a pause/yield on the host).
#pragma once

#include <cstdint>

#include "spark/kernels/control_block.hpp"
#include "spark/kernels/hd.hpp"

namespace spark::kernels {

enum class WaitStatus : std::uint8_t {
  arrived,    ///< the flag reached the sequence number
  timed_out,  ///< this wait expired and wrote the record (or lost the race to another writer)
  failed,     ///< the communicator had already failed (record written elsewhere)
};

/// One flag to wait for: it is ready when *flag >= seq (flags only ever grow).
struct FlagWait {
  const std::uint64_t* flag = nullptr;
  FailureSite site;  ///< peer, lane, seq (the value awaited), step, op, detail
};

/// Waits until the flag arrives, the communicator fails, or the current timeout plus grace
/// (both re-read from the control block on every iteration) has passed since the wait began.
/// On expiry the flag gets one last look, so data that arrived exactly at the deadline is
/// still taken. The record carries the timeout (without grace) and the time actually waited.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Clock>
SPARK_HD WaitStatus wait_flag(ControlBlock* ctl, const FlagWait& w, Clock& clock) {
  if (is_failed(ctl)) return WaitStatus::failed;
  const std::uint64_t start = clock.now_ns();
  for (;;) {
    if (load_acquire(w.flag) >= w.site.seq) return WaitStatus::arrived;
    if (is_failed(ctl)) return WaitStatus::failed;
    const std::uint32_t timeout_ms = load_acquire(&ctl->timeout_ms);
    const std::uint64_t limit_ms =
        static_cast<std::uint64_t>(timeout_ms) + load_acquire(&ctl->grace_ms);
    const std::uint64_t now = clock.now_ns();
    const std::uint64_t waited_ns = now > start ? now - start : 0;
    if (waited_ns >= limit_ms * 1000000u) {
      if (load_acquire(w.flag) >= w.site.seq) return WaitStatus::arrived;
      const std::uint64_t waited_ms = waited_ns / 1000000u;
      record_failure(ctl, w.site, kCauseTimeout,
                     waited_ms > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(waited_ms),
                     timeout_ms, clock.unix_ns());
      return WaitStatus::timed_out;
    }
    clock.relax();
  }
}

}  // namespace spark::kernels
