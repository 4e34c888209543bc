#include "stderr_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <utility>

namespace spark::launch {

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // Our own stdout was left non-blocking by someone else: wait until writable.
        struct timespec ts {
          0, 1000000
        };
        nanosleep(&ts, nullptr);
        continue;
      }
      return;  // EPIPE etc.: nobody reads our output any more; drop it
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

namespace {
// Set once by a node daemon before its threads start; read-only afterwards.
std::string g_line_host;  // NOLINT: process-wide by design (one node per process)
}  // namespace

void set_line_host(std::string host) {
  g_line_host = std::move(host);
}

std::string host_line(const std::string& line) {
  return g_line_host.empty() ? line : "host " + g_line_host + ": " + line;
}

void say(const std::string& line) {
  write_all(STDERR_FILENO, "sparkrun: " + host_line(line) + "\n");
}

void say_elapsed(std::chrono::steady_clock::time_point t0, const std::string& what) {
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%8.3f ms ", static_cast<double>(us) / 1000.0);
  write_all(STDERR_FILENO, "sparkrun: " + host_line(buf + what) + "\n");
}

}  // namespace spark::launch
