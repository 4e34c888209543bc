// SPARK_TRACE=PATH: every rank writes PATH.rank<R>.json (libspark); at the end of the job
// sparkrun merges them into PATH, one Chrome/Perfetto trace (opens in ui.perfetto.dev).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spark::launch {

struct TraceMergeResult {
  int merged = 0;       ///< per-rank files read
  int missing = 0;      ///< ranks without a (readable, current) file
  std::string message;  ///< one line for the user ("" when there was nothing to do)
};

/// Merges PATH.rank0.json .. PATH.rank<size-1>.json into PATH. Files older than
/// `job_start` are stale (an earlier run) and count as missing. A rank without a file (killed
/// before it could write one) gets a marked, empty track so that its absence is visible.
/// Never throws: a trace must not change the job's outcome.
TraceMergeResult merge_rank_traces(const std::string& path, int size,
                                   std::filesystem::file_time_type job_start) noexcept;

/// SPARK_TRACE of the job (from -x/--export, else sparkrun's environment), remembered at
/// launch together with the start time; finish() merges and prints one "sparkrun: " line.
class TraceJob {
 public:
  static TraceJob begin(const std::vector<std::pair<std::string, std::string>>& exports);
  void finish(int size) const noexcept;

 private:
  std::optional<std::string> path_;
  std::filesystem::file_time_type start_;
};

}  // namespace spark::launch
