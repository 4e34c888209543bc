#include "transport/shm/heavy_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace spark::transport {

namespace {

long membarrier(int cmd) noexcept {
  return ::syscall(SYS_membarrier, cmd, 0, 0);
}

bool try_register() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  constexpr long kNeeded =
      MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  if (supported < 0 || (supported & kNeeded) != kNeeded) return false;
  // A trial of the command itself: a seccomp filter may allow the query and the registration
  // and still refuse it.
  return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 &&
         membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

}  // namespace

bool register_light_fences() noexcept {
  static const bool registered = try_register();
  return registered;
}

bool heavy_fence() noexcept {
  if (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return true;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return false;
}

}  // namespace spark::transport
