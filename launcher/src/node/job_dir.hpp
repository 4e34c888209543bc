// The node runner's job directory (PMIX_TMPDIR: the ranks' session directories, e.g. Open
// MPI's): made at start, removed at the end; when sparkrun dies unclean its orphan watcher
// removes it. The name carries the owner's pid (sparkrun.PID.XXXXXX), so that what neither
// could remove (both SIGKILLed at once, as `pkill -9 sparkrun` does) is swept by the next
// sparkrun on the node.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace spark::launch {

class JobDir {
 public:
  /// In $TMPDIR when set; otherwise in /dev/shm (tmpfs) when it is there, else /tmp. Sweeps
  /// the stale job dirs of that base first. Throws std::system_error when none can be made.
  JobDir();
  ~JobDir();
  JobDir(const JobDir&) = delete;
  JobDir& operator=(const JobDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Where job dirs are made: $TMPDIR when set, else /dev/shm (when writable) and /tmp.
std::vector<std::string> job_dir_bases();
/// The owner's pid in a job dir's name ("sparkrun.PID.XXXXXX"), or 0 when it is not one.
pid_t job_dir_owner(std::string_view name);

/// A failed job's report folder: `given` (--report-dir) when set, else report.JOB_ID in
/// SPARK_REPORT_DIR or the working directory. One rule for the node runner (its host's part)
/// and the launcher (every host's parts, across hosts).
std::string report_dir(const std::string& given, const std::string& job_id);

/// Removes the job dirs in `base` (sparkrun.PID.*) of this user whose PID no longer exists.
/// Returns how many.
int remove_stale_job_dirs(const std::string& base);

}  // namespace spark::launch
