#include "restart_loop.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <system_error>

#include "exit_rules.hpp"
#include "net/socket.hpp"
#include "stderr_output.hpp"

namespace spark::launch {
namespace {

using net::Fd;

std::string signal_text(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

// The failure line of exit_rules / the coordinator names the cause and then what sparkrun
// does about it ("; stopping the job"), which the restart line says instead.
std::string cause_of(std::string line) {
  const size_t stop = line.rfind("; stopping ");
  return stop == std::string::npos ? line : line.substr(0, stop);
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

bool is_stop_signal(int signo) {
  return signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
}

Fd signal_fd() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  const int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
  return Fd(fd);
}

// The attempt's child: its own process group (a Ctrl-C reaches only this process, which
// forwards it once, so the node runner sees one SIGINT, not two), ended by SIGTERM (a group
// abort) if this process dies.
[[noreturn]] void run_child(pid_t parent, int sigfd, int report_fd,
                            const std::function<int(const Attempt&)>& job, Attempt attempt) {
  ::close(sigfd);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(128 + SIGTERM);
  attempt.report = [report_fd](const std::string& line) {
    write_all(report_fd, line + "\n");  // the first line is the one read (pipe: atomic)
  };
  int rc = 1;
  try {
    rc = job(attempt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    rc = 1;
  }
  std::fflush(nullptr);
  ::_exit(rc);  // PMIx may still be running in this process (node_runner: exit_after_run)
}

struct Ended {
  int code = 0;
  int status = 0;       // waitpid's
  int stop_signal = 0;  // SIGINT/SIGTERM/SIGHUP/SIGQUIT that sparkrun got meanwhile
};

Ended wait_child(pid_t pid, int sigfd) {
  Ended e;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      e.status = status;
      e.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return e;
    }
    if (r < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
    struct pollfd p = {sigfd, POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll");
    struct signalfd_siginfo si;
    while (::read(sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      const int signo = static_cast<int>(si.ssi_signo);
      if (signo == SIGCHLD) continue;
      if (is_stop_signal(signo) && e.stop_signal == 0) e.stop_signal = signo;
      ::kill(pid, signo);  // the attempt's launcher stops its ranks (twice: at once)
    }
  }
}

// Sleeps `seconds` unless a stop signal comes first: returns it, or 0.
int back_off(double seconds, int sigfd) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    struct pollfd p = {sigfd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) < 0 && errno != EINTR)
      throw std::system_error(errno, std::generic_category(), "poll");
    struct signalfd_siginfo si;
    while (::read(sigfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      const int signo = static_cast<int>(si.ssi_signo);
      if (is_stop_signal(signo)) return signo;  // SIGCHLD, SIGUSR1/2: no ranks to tell
    }
  }
}

std::string read_report(int fd) {
  std::string all;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      all.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN (a writer may live on: the orphan watcher) or EOF
  }
  return all;
}

}  // namespace

std::string attempt_output_dir(const std::string& dir, const Attempt& attempt) {
  if (dir.empty() || attempt.max_restarts == 0) return dir;
  return dir + "/attempt." + std::to_string(attempt.count);
}

std::string no_restart_reason(int code) {
  if (code == 0) return "";  // not asked: success is never restarted
  if (code == kExitTimeout) return "--timeout expired";
  if (code == kExitCannotStart)
    return "a rank's program could not be started (restarting cannot help: fix the command, "
           "its path or its permissions)";
  return "";
}

int run_with_restarts(const RestartPolicy& policy, const std::function<int(const Attempt&)>& job) {
  if (policy.max_restarts <= 0) return job(Attempt{});
  const Fd sigfd = signal_fd();
  const int attempts = policy.max_restarts + 1;
  const pid_t self = ::getpid();
  for (int count = 0;; ++count) {
    const std::string attempt_name =
        "attempt " + std::to_string(count + 1) + " of " + std::to_string(attempts);
    int report[2];
    if (::pipe2(report, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    Fd report_read(report[0]);
    std::fflush(nullptr);  // nothing buffered here may be written twice
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(report[1]);
      throw std::system_error(errno, std::generic_category(), "fork");
    }
    if (pid == 0) {
      report_read.reset();
      run_child(self, sigfd.get(), report[1], job, Attempt{count, policy.max_restarts, {}});
    }
    ::close(report[1]);
    ::setpgid(pid, pid);  // also here: a signal forwarded before the child's own setpgid
    const Ended end = wait_child(pid, sigfd.get());
    ::fcntl(report_read.get(), F_SETFL, O_NONBLOCK);
    std::string line = read_report(report_read.get());
    const bool reported = !line.empty();
    line = cause_of(line.substr(0, line.find('\n')));
    if (line.empty()) line = "exit code " + std::to_string(end.code);

    if (end.code == 0) {
      if (count > 0) say(attempt_name + " succeeded");
      return 0;
    }
    if (end.stop_signal != 0) {
      say(attempt_name + " stopped by " + signal_text(end.stop_signal) + ": not restarting");
      return end.code;
    }
    std::string reason = no_restart_reason(end.code);
    if (reason.empty() && !reported) {
      reason = WIFSIGNALED(end.status)
                   ? "its launcher died by signal " + std::to_string(WTERMSIG(end.status))
                   : "the launcher itself failed (exit " + std::to_string(end.code) +
                         ", no rank failure)";
    }
    if (!reason.empty()) {
      say(attempt_name + " failed: " + line + "; not restarting: " + reason);
      return end.code;
    }
    if (count >= policy.max_restarts) {
      say(attempt_name + " failed: " + line + "; no restarts left (--max-restarts " +
          std::to_string(policy.max_restarts) + ")");
      return end.code;
    }
    say(attempt_name + " failed: " + line + "; restarting in " + seconds_text(policy.backoff_s));
    if (const int signo = back_off(policy.backoff_s, sigfd.get()); signo != 0) {
      say(signal_text(signo) + " during the restart back-off: not restarting");
      return 128 + signo;
    }
  }
}

}  // namespace spark::launch
