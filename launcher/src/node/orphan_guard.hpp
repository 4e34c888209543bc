// Kills the ranks' process groups when sparkrun dies without cleaning up (SIGKILL, crash).
// PR_SET_PDEATHSIG already kills each rank itself; this watcher also reaches what the
// ranks started (their children stay in the rank's process group). It is a small process
// (clone with CLONE_VM: it borrows sparkrun's memory instead of copying it, on its own small
// stack) that waits for EOF on a pipe only sparkrun holds: an orderly exit disarms it first,
// any other death of sparkrun makes it SIGKILL every registered group and remove the
// job's temp dir. Where clone(CLONE_VM) is refused (qemu-user, restrictive seccomp), the
// watcher is a plain fork() of sparkrun instead, with the same guarantees.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace spark::launch {

class OrphanGuard {
 public:
  /// Starts the watcher. Call while sparkrun is still single-threaded (before PMIx starts).
  /// `max_groups`: how many process groups will be registered at most.
  explicit OrphanGuard(int max_groups);
  ~OrphanGuard();  // disarms and releases the watcher
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  static constexpr unsigned kMaxDir = 512;
  static constexpr unsigned kMaxPrefix = 128;

  /// Registers a rank's process group (its pid).
  void watch(pid_t pgid);
  /// After the kills, a watcher that outlives sparkrun also removes `dir` (the job's temp
  /// dir) and what is in it, and, once the killed groups are gone, every /dev/shm entry whose
  /// name starts with `shm_prefix` (the job's shm segments). Paths of kMaxDir bytes or more
  /// are not taken; a prefix of kMaxPrefix bytes or more is ignored.
  void remove_on_death(const std::string& dir, const std::string& shm_prefix = {});
  /// Removes the /dev/shm segments of job `job_id` that belong to `ranks` now (the job ended
  /// and every rank was reaped: what is left, a rank left behind; protocol::shm_segment::
  /// rank_of). Another host's ranks' segments on the same /dev/shm (network namespaces) stay:
  /// its daemon may still be reading their flight recorders. Returns how many.
  static int remove_shm_leftovers(const std::string& job_id, const std::vector<int>& ranks);
  /// An orderly exit: the watcher leaves without killing anything, and is reaped here.
  void disarm();
  pid_t pid() const { return pid_; }
  /// True when clone(CLONE_VM) was refused and the watcher is a fork() of sparkrun.
  bool forked() const { return forked_; }

 private:
  void reap();
  void release_area();
  pid_t pid_ = -1;
  bool forked_ = false;
  int fd_ = -1;
  void* area_ = nullptr;  // the watcher's stack and group list (mmap)
  size_t area_size_ = 0;
};

}  // namespace spark::launch
