// The host's Clock for wait_flag(): steady_clock for the deadline, system_clock for the record.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace spark::kernels {

struct SteadyClock {
  std::uint64_t now_ns() const {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }
  std::int64_t unix_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  /// Polls stay cheap for the first microseconds, then give the core away (2-core CI machines,
  /// and a host proxy must not starve the rank's own threads).
  void relax() {
    if (++polls_ < 1024) return;
    std::this_thread::yield();
    if (polls_ > 8192) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  std::uint64_t polls_ = 0;
};

}  // namespace spark::kernels
