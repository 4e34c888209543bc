#include "orphan_guard.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>

#include "spark/protocol/shm_segment.hpp"

namespace spark::launch {
namespace {

// The watcher's own memory: its stack and the list of groups it kills. Shared with sparkrun
// (CLONE_VM) but touched by sparkrun only to map, to publish the job dir and, once the watcher
// is reaped, to unmap it. The mapping is MAP_SHARED so that a watcher made by the fork()
// fallback sees the job dir that sparkrun publishes after the fork.
struct WatcherArea {
  int fd;                                    // read end of the pipe
  unsigned dir_len;                          // bytes of dir, published last (0: nothing to remove)
  char dir[OrphanGuard::kMaxDir];            // the job's temp dir, removed after the kills
  char shm_prefix[OrphanGuard::kMaxPrefix];  // the job's /dev/shm names ("" = none)
  size_t capacity;                           // entries in groups
  size_t count;
  pid_t groups[1];  // [capacity]
};

constexpr size_t kStackSize = 64 * 1024;
constexpr int kMaxDepth = 8;  // the job dir holds PMIx's few levels; deeper is left alone

// Calls `remove(name)` for every entry of the open directory `fd` (but "." and ".."), pass
// after pass until a pass removes nothing: entries removed while reading can shift the rest.
// No allocation: a small buffer on the caller's stack (the watcher calls it too).
template <typename Remove>
void remove_each_entry(int fd, Remove remove) {
  struct Dirent64 {
    std::uint64_t d_ino;
    std::int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[1];
  };
  char buf[2048];
  for (bool removed = true; removed;) {
    removed = false;
    if (syscall(SYS_lseek, fd, 0, SEEK_SET) < 0) return;
    for (;;) {
      const long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const auto* e = reinterpret_cast<const Dirent64*>(buf + off);
        off += e->d_reclen;
        const char* name = e->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        if (remove(name)) removed = true;
      }
    }
  }
}

// Removes the entries of the open directory `fd`, then nothing else (the caller removes the
// directory itself).
void remove_entries(int fd, int depth) {
  remove_each_entry(fd, [fd, depth](const char* name) {
    if (syscall(SYS_unlinkat, fd, name, 0) == 0) return true;
    if (depth >= kMaxDepth) return false;
    const long sub = syscall(SYS_openat, fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return false;
    remove_entries(static_cast<int>(sub), depth + 1);
    syscall(SYS_close, sub);
    return syscall(SYS_unlinkat, fd, name, AT_REMOVEDIR) == 0;
  });
}

// Unlinks the entries of directory `dir` whose names start with `prefix` (plain system calls,
// no allocation: the watcher calls it too). Returns how many were removed.
int unlink_prefixed(const char* dir, const char* prefix) {
  const std::size_t len = std::strlen(prefix);
  if (len == 0) return 0;
  const long fd =
      syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int count = 0;
  remove_each_entry(static_cast<int>(fd), [fd, prefix, len, &count](const char* name) {
    if (std::strncmp(name, prefix, len) != 0 || syscall(SYS_unlinkat, fd, name, 0) != 0) {
      return false;
    }
    ++count;
    return true;
  });
  syscall(SYS_close, fd);
  return count;
}

// Waits (at most ~2 s) until no process of the killed groups exists: a rank that was inside
// shm_open() when SIGKILL came may still create its segment before it dies.
void wait_groups_gone(const pid_t* groups, size_t count) {
  for (int round = 0; round < 200; ++round) {
    bool alive = false;
    for (size_t i = 0; i < count && !alive; ++i) alive = kill(-groups[i], 0) == 0;
    if (!alive) return;
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ten_ms, nullptr);
  }
}

void remove_tree(const char* dir) {
  const long fd =
      syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  remove_entries(static_cast<int>(fd), 0);
  syscall(SYS_close, fd);
  syscall(SYS_unlinkat, AT_FDCWD, dir, AT_REMOVEDIR);
}

size_t area_bytes(size_t capacity) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = kStackSize + sizeof(WatcherArea) + capacity * sizeof(pid_t);
  return (bytes + page - 1) / page * page;
}

// The watcher, from clone(CLONE_VM) to _exit. It shares sparkrun's memory (no copy of
// sparkrun's page tables, as fork() would make, and no copy-on-write faults for sparkrun
// afterwards) but has its own stack, file table and signal dispositions. Only plain system
// calls here, and no allocation: sparkrun's heap is in use by sparkrun. (errno lives in
// sparkrun's main-thread TLS: only failing calls write it, and none of these fail while
// sparkrun is alive. The blocking read and the open go through syscall(): glibc's wrappers
// of cancellation points would flip cancellation state in sparkrun's thread descriptor.)
int watcher_main(void* p) {
  auto* area = static_cast<WatcherArea*>(p);
  // Ignore terminal signals: Ctrl-C reaches sparkrun's process group, and sparkrun does
  // the orderly abort; the watcher only acts when sparkrun is gone.
  struct sigaction ign;
  std::memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) sigaction(s, &ign, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Keep only the pipe's read end (as fd 3); do not hold sparkrun's stdout/stderr open (a
  // reader would wait for us).
  if (area->fd != 3) {
    dup2(area->fd, 3);
    area->fd = 3;
  }
  int null_fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR));
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
  }
  close_range(4, ~0U, 0);
  for (;;) {
    pid_t pgid = 0;
    ssize_t n = syscall(SYS_read, 3, &pgid, sizeof pgid);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof pgid)) break;  // EOF: sparkrun is gone
    if (pgid == 0) _exit(0);                            // disarmed
    if (area->count < area->capacity) area->groups[area->count++] = pgid;
  }
  for (size_t i = 0; i < area->count; ++i) kill(-area->groups[i], SIGKILL);
  // sparkrun's TempDir destructor did not run: the job's directory (PMIx rendezvous files,
  // in /dev/shm by default, i.e. memory) would stay behind, and so would the shm segments of
  // ranks that were killed before they unlinked them (during wire-up).
  if (__atomic_load_n(&area->dir_len, __ATOMIC_ACQUIRE) > 0) {
    wait_groups_gone(area->groups, area->count);
    remove_tree(area->dir);
    unlink_prefixed("/dev/shm", area->shm_prefix);
  }
  _exit(0);
}

}  // namespace

OrphanGuard::OrphanGuard(int max_groups) {
  const size_t capacity = static_cast<size_t>(max_groups > 0 ? max_groups : 1);
  area_size_ = area_bytes(capacity);
  void* mem = mmap(nullptr, area_size_, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (mem == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  area_ = mem;
  auto* area = reinterpret_cast<WatcherArea*>(static_cast<char*>(mem) + kStackSize);
  area->capacity = capacity;
  area->count = 0;
  area->dir_len = 0;
  area->shm_prefix[0] = 0;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    int err = errno;
    release_area();
    throw std::system_error(err, std::generic_category(), "pipe2");
  }
  area->fd = fds[0];
  // The stack grows down from the start of the area.
  pid_ = clone(watcher_main, area, CLONE_VM | SIGCHLD, area);
  if (pid_ < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM)) {
    // Emulators and sandboxes that restrict clone flags (qemu-user refuses CLONE_VM without
    // CLONE_THREAD; seccomp profiles of some containers) still allow fork(): the watcher is
    // then a copy of sparkrun (costlier: page tables copied, copy-on-write faults after) with
    // the same pipe, list and job dir (the area is MAP_SHARED), so the same guarantees.
    pid_ = ::fork();
    if (pid_ == 0) watcher_main(area);  // never returns
    forked_ = pid_ > 0;
  }
  if (pid_ < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    release_area();
    throw std::system_error(err, std::generic_category(), "clone (orphan watcher)");
  }
  close(fds[0]);
  fd_ = fds[1];
}

OrphanGuard::~OrphanGuard() {
  disarm();
}

void OrphanGuard::release_area() {
  if (area_ != nullptr) munmap(area_, area_size_);
  area_ = nullptr;
}

void OrphanGuard::reap() {
  if (pid_ > 0) {
    // Disarmed, the watcher exits at once; wait for it so that no zombie "[sparkrun]" is
    // left for PID 1 (which, in a container, may never reap it).
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
  release_area();  // the watcher is gone: its stack and list are free
}

void OrphanGuard::watch(pid_t pgid) {
  if (fd_ < 0 || pgid <= 0) return;
  ssize_t n;
  do {
    n = write(fd_, &pgid, sizeof pgid);
  } while (n < 0 && errno == EINTR);
}

void OrphanGuard::remove_on_death(const std::string& dir, const std::string& shm_prefix) {
  if (area_ == nullptr || dir.empty() || dir.size() >= kMaxDir) return;
  auto* area = reinterpret_cast<WatcherArea*>(static_cast<char*>(area_) + kStackSize);
  std::memcpy(area->dir, dir.c_str(), dir.size() + 1);
  if (shm_prefix.size() < kMaxPrefix)
    std::memcpy(area->shm_prefix, shm_prefix.c_str(), shm_prefix.size() + 1);
  __atomic_store_n(&area->dir_len, static_cast<unsigned>(dir.size()), __ATOMIC_RELEASE);
}

int OrphanGuard::remove_shm_leftovers(const std::string& job_id, const std::vector<int>& ranks) {
  const long fd =
      syscall(SYS_openat, AT_FDCWD, "/dev/shm", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int count = 0;
  remove_each_entry(static_cast<int>(fd), [&](const char* name) {
    const int rank = protocol::shm_segment::rank_of(name, job_id);
    if (rank < 0 || std::find(ranks.begin(), ranks.end(), rank) == ranks.end() ||
        syscall(SYS_unlinkat, fd, name, 0) != 0)
      return false;
    ++count;
    return true;
  });
  syscall(SYS_close, fd);
  return count;
}

void OrphanGuard::disarm() {
  if (fd_ < 0) return;
  pid_t zero = 0;
  ssize_t n;
  do {
    n = write(fd_, &zero, sizeof zero);
  } while (n < 0 && errno == EINTR);
  close(fd_);
  fd_ = -1;
  reap();
}

}  // namespace spark::launch
