#include "verbs/limits.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cmath>

#include "verbs/verbs_error.hpp"

namespace spark::verbs {

std::optional<std::uint64_t> memlock_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) throw_call("getrlimit(RLIMIT_MEMLOCK)", "", errno);
  if (rl.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<std::uint64_t>(rl.rlim_cur);
}

std::string memlock_fix_text() {
  return "RDMA pins memory and the locked-memory limit (RLIMIT_MEMLOCK) is too low: run "
         "`ulimit -l unlimited` before starting, or add `* - memlock unlimited` to "
         "/etc/security/limits.conf (log in again), or set LimitMEMLOCK=infinity in the "
         "systemd unit (slurmd, sshd) that starts the job";
}

std::string memlock_problem(std::optional<std::uint64_t> limit, std::uint64_t needed) {
  if (!limit || *limit >= needed) return {};
  return "cannot pin " + std::to_string(needed) + " bytes for RDMA: locked-memory limit is " +
         std::to_string(*limit) + " bytes (ulimit -l " + std::to_string(*limit / 1024) + "). " +
         memlock_fix_text();
}

void check_memlock(std::uint64_t needed) {
  std::string problem = memlock_problem(memlock_limit(), needed);
  if (!problem.empty()) throw VerbsError(problem);
}

int mtu_bytes(ibv_mtu mtu) noexcept {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

std::string mtu_mismatch(int local_mtu, int peer_mtu, int peer, const std::string& lane) {
  if (local_mtu == peer_mtu) return {};
  return "path MTU mismatch with rank " + std::to_string(peer) + " on lane " + lane + ": local " +
         std::to_string(local_mtu) + " bytes, peer " + std::to_string(peer_mtu) +
         " bytes; set the same interface MTU on both ends (9000 on a Spark: ip link set DEV "
         "mtu 9000), otherwise RDMA fails with retry-exceeded errors";
}

QpTimeouts qp_timeouts(std::uint32_t fail_stop_ms) noexcept {
  QpTimeouts t;
  const double budget_ms = fail_stop_ms / 2.0;
  const double attempts = t.retry_cnt + 1.0;
  // 4.096 us * 2^e * attempts <= budget; keep e in [1, 20] (20 = 4.3 s per attempt, what
  // NCCL uses on real fabrics; anything lower than 1 means "infinite" to the hardware).
  int e = 1;
  while (e < 20 && 4.096e-3 * std::ldexp(1.0, e + 1) * attempts <= budget_ms) ++e;
  t.timeout = static_cast<std::uint8_t>(e);
  t.give_up_ms = 4.096e-3 * std::ldexp(1.0, e) * attempts;
  return t;
}

}  // namespace spark::verbs
