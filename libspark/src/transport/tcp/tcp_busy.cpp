// TcpTransport::lane_busy's source: the kernel's own account of a connection's busy time.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>

namespace spark::transport {

std::chrono::nanoseconds tcp_busy_time(int fd) noexcept {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(tcp_info, tcpi_busy_time) + sizeof info.tcpi_busy_time)
    return {};
  return std::chrono::microseconds(info.tcpi_busy_time);
}

}  // namespace spark::transport
