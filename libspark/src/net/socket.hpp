// The one fd / socket helper (libspark, its tools, the launcher): an owned descriptor, a
// listening tcp socket, and a tcp connect bounded by a timeout. IPv4 in host byte order.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace spark::net {

/// Owns a file descriptor: closed on destruction or reset(); move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

/// The ports a listener may take (SPARK_TCP_PORT_RANGE, CommOptions::tcp_ports): first..last,
/// or any ephemeral port when first is 0.
struct PortRange {
  int first = 0;
  int last = 0;
};

/// A listening tcp socket on `ipv4` (0: every address), on an ephemeral port or the first free
/// port of `ports`. `flags` are extra socket(2) type flags (SOCK_NONBLOCK). Throws spark::Error
/// "cannot listen on <what> (<address>): <reason>"; when every port of the range is taken the
/// reason names the range and the fix.
class Listener {
 public:
  Listener(std::uint32_t ipv4, const std::string& what, int flags = 0, int backlog = 64,
           const PortRange& ports = {});
  int fd() const noexcept { return fd_.get(); }
  int port() const noexcept { return port_; }

 private:
  Fd fd_;
  int port_ = 0;
};

/// A non-blocking tcp connection from `from` (its address; 0: any) to ipv4:port within
/// `timeout`. On failure an empty Fd, and *why (when given) says why: "cannot bind to A: ...",
/// "connect to A:P failed: ...", "no connection to A:P".
Fd connect_within(std::uint32_t from, std::uint32_t ipv4, int port,
                  std::chrono::milliseconds timeout, std::string* why = nullptr);

}  // namespace spark::net
