// free_port(): a TCP port for a test's listener (an env rendezvous, a store), drawn by the rule
// of tests/lib/free_port.sh: from 20000 up to the kernel's ephemeral range (or above it where
// it starts low), never inside it. A port inside that range may become any connection's local
// end between the check and the listen: arm64.fault lost a run to "Address already in use"
// when a port the kernel had just handed out (bind to port 0) went to a connection of the test
// running beside it before rank 0 listened (under qemu-user that takes hundreds of ms).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>

namespace spark::test {

/// Whether nothing on this host holds `port` on 127.0.0.1 now (a bind without SO_REUSEADDR).
inline bool port_is_free(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return ok;
}

inline std::uint16_t free_port() {
  int lo = 20000, eph_lo = 32768, eph_hi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> eph_lo >> eph_hi;
  int hi = eph_lo;
  if (eph_lo <= lo + 1000) {  // an ephemeral range that starts low: the ports above it
    lo = eph_hi + 1;
    hi = 65536;
  }
  if (hi - lo > 100) {
    std::random_device rd;
    std::uniform_int_distribution<int> pick(lo, hi - 1);
    for (int i = 0; i < 50; ++i) {
      const auto port = static_cast<std::uint16_t>(pick(rd));
      if (port_is_free(port)) return port;
    }
  }
  throw std::runtime_error("free_port: no free port outside the ephemeral range in 50 tries");
}

}  // namespace spark::test
