// Length-prefixed frames over the socketpair between a test's parent and its forked ranks
// (endpoint exchange, barriers, results). Test helper only.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace spark::test {

inline void write_all(int fd, const void* p, std::size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw std::runtime_error("write to control socket: " + std::string(std::strerror(errno)));
    b += w;
    n -= static_cast<std::size_t>(w);
  }
}

inline bool read_all(int fd, void* p, std::size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

inline void send_frame(int fd, const std::string& s) {
  std::uint32_t n = static_cast<std::uint32_t>(s.size());
  write_all(fd, &n, sizeof n);
  write_all(fd, s.data(), s.size());
}

inline bool recv_frame(int fd, std::string* s) {
  std::uint32_t n = 0;
  if (!read_all(fd, &n, sizeof n) || n > (1u << 24)) return false;
  s->resize(n);
  return read_all(fd, s->data(), n);
}

}  // namespace spark::test
