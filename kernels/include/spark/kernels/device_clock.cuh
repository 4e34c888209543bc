// The GPU's Clock for wait_flag(): %globaltimer (nanoseconds; on Linux drivers it counts from
// the Unix epoch, so it also serves as the record's wall-clock time).
#pragma once

#include <cstdint>

namespace spark::kernels {

struct GlobalTimerClock {
  __device__ std::uint64_t now_ns() const {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ std::int64_t unix_ns() const { return static_cast<std::int64_t>(now_ns()); }
  /// Polling mapped host memory costs a PCIe / C2C round trip; sleep a little between polls.
  __device__ void relax() const { __nanosleep(200); }
};

}  // namespace spark::kernels
