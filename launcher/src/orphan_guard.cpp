#include "orphan_guard.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

namespace spark::launch {
namespace {

[[noreturn]] void watcher_main(int fd, std::vector<pid_t>& groups) {
  // Ignore terminal signals: Ctrl-C reaches sparkrun's process group, and sparkrun does
  // the orderly abort; the watcher only acts when sparkrun is gone.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Do not hold sparkrun's stdout/stderr open (a reader would wait for us).
  int null_fd = open("/dev/null", O_RDWR);
  if (null_fd >= 0) {
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
  }
  for (;;) {
    pid_t pgid = 0;
    ssize_t n = read(fd, &pgid, sizeof pgid);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof pgid)) break;  // EOF: sparkrun is gone
    if (pgid == 0) _exit(0);                            // disarmed
    if (groups.size() < groups.capacity()) groups.push_back(pgid);
  }
  for (pid_t g : groups) kill(-g, SIGKILL);
  _exit(0);
}

}  // namespace

OrphanGuard::OrphanGuard(int max_groups) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  std::vector<pid_t> groups;
  groups.reserve(static_cast<size_t>(max_groups > 0 ? max_groups : 1));
  pid_ = fork();
  if (pid_ < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    throw std::system_error(err, std::generic_category(), "fork");
  }
  if (pid_ == 0) {
    close(fds[1]);
    if (fds[0] != 3) dup2(fds[0], 3);
    close_range(4, ~0U, 0);  // keep only the read end (now fd 3)
    watcher_main(3, groups);
  }
  close(fds[0]);
  fd_ = fds[1];
}

OrphanGuard::~OrphanGuard() {
  disarm();
}

void OrphanGuard::reap() {
  if (pid_ <= 0) return;
  // Disarmed, the watcher exits at once; wait for it so that no zombie "[sparkrun]" is left
  // for PID 1 (which, in a container, may never reap it).
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

void OrphanGuard::watch(pid_t pgid) {
  if (fd_ < 0 || pgid <= 0) return;
  ssize_t n;
  do {
    n = write(fd_, &pgid, sizeof pgid);
  } while (n < 0 && errno == EINTR);
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
