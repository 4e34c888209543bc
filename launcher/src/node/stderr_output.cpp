#include "stderr_output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

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

void say(const std::string& line) {
  write_all(STDERR_FILENO, "sparkrun: " + line + "\n");
}

void say_elapsed(std::chrono::steady_clock::time_point t0, const std::string& what) {
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%8.3f ms ", static_cast<double>(us) / 1000.0);
  write_all(STDERR_FILENO, std::string("sparkrun: ") + buf + what + "\n");
}

}  // namespace spark::launch
