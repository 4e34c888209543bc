// Limits the verbs layer checks before it starts: locked memory, path MTU, and the QP
// timeout / retry values derived from the fail-stop timeout.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace spark::verbs {

/// RLIMIT_MEMLOCK soft limit in bytes; nullopt = unlimited.
std::optional<std::uint64_t> memlock_limit();

/// The text that tells a user how to raise the locked-memory limit.
std::string memlock_fix_text();

/// Empty when `limit` (nullopt = unlimited) allows pinning `needed` bytes; otherwise the
/// error message (what is needed, what the limit is, and the fix).
std::string memlock_problem(std::optional<std::uint64_t> limit, std::uint64_t needed);

/// Throws VerbsError when the current RLIMIT_MEMLOCK cannot pin `needed` bytes.
void check_memlock(std::uint64_t needed);

/// 256..4096 for IBV_MTU_256..IBV_MTU_4096, 0 otherwise.
int mtu_bytes(ibv_mtu mtu) noexcept;

/// Empty when both ends agree, else "path MTU mismatch with rank P on lane L: local 4096
/// bytes, peer 1024 bytes; set the same MTU (9000 on a Spark) on both ends".
std::string mtu_mismatch(int local_mtu, int peer_mtu, int peer, const std::string& lane);

/// QP retransmission settings. The local ACK timeout is 4.096 us * 2^timeout; the verbs layer
/// gives up after (retry_cnt + 1) such intervals and flushes with an error completion.
struct QpTimeouts {
  std::uint8_t timeout = 14;   ///< ibv_qp_attr.timeout exponent
  std::uint8_t retry_cnt = 7;  ///< transport retries (max 7)
  std::uint8_t rnr_retry = 6;  ///< receiver-not-ready retries (7 would mean "forever")
  double give_up_ms = 0;       ///< (retry_cnt + 1) * 4.096 us * 2^timeout
};

/// The largest timeout exponent whose give-up time stays within half of `fail_stop_ms`, so
/// that a dead link turns into an error completion before the wait point's deadline
/// (documented in docs/roce.md).
QpTimeouts qp_timeouts(std::uint32_t fail_stop_ms) noexcept;

}  // namespace spark::verbs
