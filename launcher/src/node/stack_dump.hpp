// Every rank's thread stacks, for the report of a job that timed out and for `sparkrun status
// --stacks`: eu-stack (Debian's elfutils), else gdb, on each rank at once, all bounded by one
// deadline; what a tool has not printed by then is cut off and said so. A Python rank that
// imported the libspark package also writes its Python frames (faulthandler, registered on
// protocol::rank_env::kPyStacksSignal) to a file in the job dir, which is added.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace spark::launch {

struct StackTarget {
  int rank = 0;
  pid_t pid = -1;
  std::string python_file;  ///< the rank's faulthandler file (may not exist: not Python)
};

/// The bound of the stack step (a failed job's report, `sparkrun status --stacks`); across
/// hosts the launcher waits this much longer for daemons that collect stacks before they report.
inline constexpr std::chrono::seconds kStackBudget{10};

/// The stacks as text, one section per rank ("=== rank R (pid P) ==="). Never takes longer
/// than `budget` (plus the time to kill what is left).
std::string collect_stacks(const std::vector<StackTarget>& targets,
                           std::chrono::milliseconds budget);

/// The faulthandler file of `rank` in the job dir `job_dir`.
std::string python_stack_file(const std::string& job_dir, int rank);

}  // namespace spark::launch
