// The node runner's job directory (PMIX_TMPDIR: the ranks' session directories, e.g. Open
// MPI's): made at start, removed at the end; when sparkrun dies unclean its orphan watcher
// removes it. The name carries the owner's pid (sparkrun.PID.XXXXXX), so that what neither
// could remove (both SIGKILLed at once, as `pkill -9 sparkrun` does) is swept by the next
// sparkrun on the node.
#pragma once

#include <string>

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

/// Removes the job dirs in `base` (sparkrun.PID.*) of this user whose PID no longer exists.
/// Returns how many.
int remove_stale_job_dirs(const std::string& base);

}  // namespace spark::launch
