// The fail-stop record: who waited on whom, where, and for how long.
#pragma once

#include <cstdint>
#include <string>

namespace spark {

enum class FailureCause : std::uint8_t {
  timeout,       ///< no data from the peer within SPARKNET_ROCE_TIMEOUT_MS
  peer_closed,   ///< the peer's connection closed or its process is gone
  peer_error,    ///< a transport error (e.g. a verbs error completion)
  remote_abort,  ///< another rank failed and the group is being aborted
  mismatch,      ///< ranks called different collectives at the same sequence number
};

/// Plain, fixed-layout data so that it can live in pinned host memory and be written by a GPU
/// kernel as well as by host code. Strings are NUL-terminated and truncated to fit.
struct FailureRecord {
  std::int32_t rank = -1;   ///< the rank that detected the failure
  std::int32_t peer = -1;   ///< the rank it was waiting on (or relaying through)
  std::uint64_t seq = 0;    ///< sequence number of the operation
  std::uint32_t step = 0;   ///< step inside the operation's algorithm
  std::uint32_t waited_ms = 0;
  std::uint32_t timeout_ms = 0;
  FailureCause cause = FailureCause::timeout;
  std::int64_t time_unix_ns = 0;  ///< wall-clock time of detection
  char lane[32] = {};             ///< e.g. "tcp:1", "shm", "rocep1s0f0"
  char op[24] = {};               ///< e.g. "allreduce"
  char detail[128] = {};          ///< cause-specific text (verbs status, errno text, ...)
};

/// The one-line report, e.g.
/// "rank 0: allreduce seq 42 step 1: no data from rank 2 on lane tcp:1 after 10000 ms (timeout 10000 ms)"
std::string to_string(const FailureRecord& record);

}  // namespace spark
