// A small multi-process fixture in the style of Gloo's multiproc_test: fork one process per
// rank, run a function in it, and collect each rank's exit code and a text report through a
// pipe. Children never touch gtest; the parent asserts. Every run has a deadline after which
// remaining children are killed, so a hang fails the test instead of blocking it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../lib/free_port.hpp"

namespace spark::test {

struct RankResult {
  int exit_code = -1;  ///< 128+signal when killed
  std::string report;  ///< what the rank wrote
  bool killed_by_deadline = false;
};

/// fn(rank, report) runs in rank's child process; its return value is the exit code.
/// Exceptions are caught and turned into "exception: what()" with exit code 99.
inline std::vector<RankResult> run_ranks(
    const std::vector<int>& ranks, const std::function<int(int rank, std::string& report)>& fn,
    std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  struct Child {
    pid_t pid;
    int fd;
  };
  std::vector<Child> children;
  for (int rank : ranks) {
    int fds[2];
    if (pipe(fds) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string report;
      int code = 0;
      try {
        code = fn(rank, report);
      } catch (const std::exception& e) {
        report += std::string("exception: ") + e.what();
        code = 99;
      }
      const char* p = report.data();
      std::size_t left = report.size();
      while (left > 0) {
        const ssize_t n = write(fds[1], p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<std::size_t>(n);
      }
      _exit(code);  // no gtest teardown, no atexit handlers of the parent
    }
    close(fds[1]);
    children.push_back({pid, fds[0]});
  }
  std::vector<RankResult> results(children.size());
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (std::size_t i = 0; i < children.size(); ++i) {
    auto& r = results[i];
    char buf[4096];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      pollfd pfd{children[i].fd, POLLIN, 0};
      const int rc = left.count() > 0 ? poll(&pfd, 1, static_cast<int>(left.count())) : 0;
      if (rc <= 0) {
        for (auto& c : children) kill(c.pid, SIGKILL);
        r.killed_by_deadline = true;
        break;
      }
      const ssize_t n = read(children[i].fd, buf, sizeof buf);
      if (n <= 0) break;
      r.report.append(buf, static_cast<std::size_t>(n));
    }
    close(children[i].fd);
    int status = 0;
    waitpid(children[i].pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return results;
}

}  // namespace spark::test
