#include "spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace spark::launch {
namespace {

enum Stage : int {
  kSetpgid = 1,
  kPdeathsig,
  kParentGone,
  kStdin,
  kStdout,
  kStderr,
  kAffinity,
  kChdir,
  kExec
};

const char* stage_text(int stage) {
  switch (stage) {
    case kSetpgid:
      return "setpgid";
    case kPdeathsig:
      return "prctl(PR_SET_PDEATHSIG)";
    case kParentGone:
      return "sparkrun exited before the rank started";
    case kStdin:
      return "redirecting stdin";
    case kStdout:
      return "redirecting stdout";
    case kStderr:
      return "redirecting stderr";
    case kAffinity:
      return "sched_setaffinity (binding)";
    case kChdir:
      return "changing to the working directory (--wdir)";
    default:
      return "";
  }
}

struct Report {
  int stage;
  int err;
};

// Child side: report and leave. Only async-signal-safe calls.
[[noreturn]] void child_fail(int fd, int stage, int err) {
  Report r{stage, err};
  ssize_t ignored = ::write(fd, &r, sizeof r);
  (void)ignored;
  _exit(127);
}

bool dup_to(int from, int to) {
  if (from < 0 || from == to) return true;
  while (::dup2(from, to) < 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

// What the child needs, prepared by the parent: the child shares the parent's memory
// (CLONE_VM) until it execs, so it must not allocate or touch anything but this.
struct ChildArgs {
  const char* path;
  const char* cwd;  // null: stay
  char** argv;
  char** envp;
  pid_t parent;
  int in_fd, out_fd, err_fd, status_fd;
  bool bind;
  cpu_set_t cpus;
  struct sigaction dfl;
  sigset_t none;
};

// The child, up to exec. Only async-signal-safe system calls; it runs on its own stack.
int child_main(void* p) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(p);
  const int wfd = a.status_fd;
  // Own process group: the group abort kills the rank and whatever it started.
  if (::setpgid(0, 0) != 0) child_fail(wfd, kSetpgid, errno);
  // Die with sparkrun (SIGKILL to sparkrun must not leave ranks behind). PDEATHSIG is
  // tied to the creating thread: sparkrun starts ranks from its main thread, which lives to
  // the end.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(wfd, kPdeathsig, errno);
  if (::getppid() != a.parent) child_fail(wfd, kParentGone, 0);  // died before prctl
  // Default signal state: sparkrun blocks signals for its signalfd and ignores SIGPIPE;
  // blocked masks and ignored dispositions survive exec. Handlers first, then the mask.
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &a.dfl, nullptr);
  }
  ::sigprocmask(SIG_SETMASK, &a.none, nullptr);
  if (!dup_to(a.in_fd, STDIN_FILENO)) child_fail(wfd, kStdin, errno);
  if (!dup_to(a.out_fd, STDOUT_FILENO)) child_fail(wfd, kStdout, errno);
  if (!dup_to(a.err_fd, STDERR_FILENO)) child_fail(wfd, kStderr, errno);
  if (a.bind && ::sched_setaffinity(0, sizeof a.cpus, &a.cpus) != 0) {
    child_fail(wfd, kAffinity, errno);
  }
  // After the redirections, so that a relative program path resolves against the rank's
  // directory, as with mpirun's -wdir.
  if (a.cwd != nullptr && ::chdir(a.cwd) != 0) child_fail(wfd, kChdir, errno);
  // Nothing else of sparkrun's leaks into the rank (PMIx sockets, other ranks' pipes).
  ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  ::execve(a.path, a.argv, a.envp);
  child_fail(wfd, kExec, errno);
}

// Owns the child's stack.
class ChildStack {
 public:
  static constexpr size_t kSize = 256 * 1024;
  ChildStack()
      : base_(::mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0)) {
    if (base_ == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap");
  }
  ~ChildStack() { ::munmap(base_, kSize); }
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;
  void* top() const { return static_cast<char*>(base_) + kSize; }

 private:
  void* base_;
};

}  // namespace

StartedChild start_child(const SpawnRequest& req) {
  // Everything the child needs, prepared before the clone (no malloc in the child).
  std::vector<char*> argv;
  argv.reserve(req.argv.size() + 1);
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  envp.reserve(req.envp.size() + 1);
  for (const auto& e : req.envp) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  ChildArgs args;
  std::memset(&args, 0, sizeof args);
  args.path = req.path.c_str();
  args.cwd = req.cwd.empty() ? nullptr : req.cwd.c_str();
  args.argv = argv.data();
  args.envp = envp.data();
  args.parent = ::getpid();
  args.bind = req.cpuset.has_value();
  if (args.bind) args.cpus = *req.cpuset;
  args.dfl.sa_handler = SIG_DFL;
  sigemptyset(&args.none);
  args.out_fd = req.stdout_fd;
  args.err_fd = req.stderr_fd;

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe2");
  int null_fd = -1;
  if (req.stdin_fd < 0) {
    null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) {
      int err = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::system_error(err, std::generic_category(), "open /dev/null");
    }
  }
  args.in_fd = req.stdin_fd >= 0 ? req.stdin_fd : null_fd;
  args.status_fd = fds[1];

  // vfork semantics (as glibc's posix_spawn): the child borrows the parent's memory, so
  // nothing is copied, and the parent continues once the child has exec'd or failed. This
  // is several times cheaper than fork() for a process with PMIx's threads and libraries.
  ChildStack stack;
  pid_t pid = ::clone(child_main, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  if (pid < 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    if (null_fd >= 0) ::close(null_fd);
    throw std::system_error(err, std::generic_category(), "clone");
  }
  // Parent. setpgid here too, so the group exists before any kill(-pid) (no race).
  ::setpgid(pid, pid);
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  return {pid, fds[0]};
}

std::optional<std::string> await_exec(StartedChild& child, const std::string& path) {
  Report r{0, 0};
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t n = ::read(child.status_fd, reinterpret_cast<char*>(&r) + got, sizeof r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(child.status_fd);
  child.status_fd = -1;
  if (got == 0) return std::nullopt;  // pipe closed by exec: started
  if (got != sizeof r) return path + ": the rank died while starting";
  if (r.stage == kExec) return path + ": " + std::strerror(r.err);
  if (r.err == 0) return path + ": " + stage_text(r.stage);
  return path + ": " + stage_text(r.stage) + ": " + std::strerror(r.err);
}

std::optional<std::string> resolve_program(const std::string& name, const std::string& path_env) {
  if (name.find('/') != std::string::npos) return name;
  std::string dirs = path_env.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_env;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return std::nullopt;
}

}  // namespace spark::launch
