#include "net/socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "spark/error.hpp"

namespace spark::net {

namespace {

std::string dotted(std::uint32_t ipv4) {
  in_addr a{htonl(ipv4)};
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

sockaddr_in address(std::uint32_t ipv4, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ipv4);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  return a;
}

}  // namespace

Listener::Listener(std::uint32_t ipv4, const std::string& what, int flags, int backlog,
                   const PortRange& ports) {
  auto fail = [&](const std::string& why) {
    throw Error("cannot listen on " + what + " (" + dotted(ipv4) + "): " + why);
  };
  // SO_REUSEADDR only (never SO_REUSEPORT): a restarted job may bind while the last one's
  // sockets are in TIME_WAIT, but two listeners never share a port, so another job's ranks
  // can never be handed this job's connections. Two sockets may both bind a port before
  // either listens: the second one's listen() then fails with EADDRINUSE, and it moves on.
  const int first = ports.first, last = ports.first == 0 ? 0 : ports.last;
  for (int port = first; port <= last; ++port) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0));
    if (!fd) fail(std::strerror(errno));
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = address(ipv4, port);
    socklen_t len = sizeof a;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(fd.get(), backlog) != 0) {
      if (errno == EADDRINUSE && port != 0) continue;  // taken: the range's next port
      fail(std::strerror(errno));
    }
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      fail(std::strerror(errno));
    fd_ = std::move(fd);
    port_ = ntohs(a.sin_port);
    return;
  }
  const std::string range =
      std::to_string(first) + (last == first ? "" : "-" + std::to_string(last));
  fail((last == first ? "port " : "every port of ") + range + " (SPARK_TCP_PORT_RANGE=" + range +
       ") is in use on this node: another job uses the same ports, or this node has more "
       "listeners than the range has ports (each rank of the tcp transport takes one, a "
       "node's first rank one more for the fabric probes); widen SPARK_TCP_PORT_RANGE, give "
       "each job its own range, or unset it for ephemeral ports");
}

Fd connect_within(std::uint32_t from, std::uint32_t ipv4, int port,
                  std::chrono::milliseconds timeout, std::string* why) {
  auto fail = [&](const std::string& text) {
    if (why != nullptr) *why = text;
    return Fd();
  };
  const std::string to = dotted(ipv4) + ":" + std::to_string(port);
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return fail(std::string("socket: ") + std::strerror(errno));
  if (from != 0) {  // leave through this lane: the lane's address is the source
    sockaddr_in local = address(from, 0);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0)
      return fail("cannot bind to " + dotted(from) + ": " + std::strerror(errno));
  }
  sockaddr_in remote = address(ipv4, port);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&remote), sizeof remote) == 0) return s;
  if (errno != EINPROGRESS) return fail("connect to " + to + " failed: " + std::strerror(errno));
  pollfd pfd{s.get(), POLLOUT, 0};
  const int ms = timeout.count() <= 0 ? 0 : static_cast<int>(timeout.count());
  if (ms == 0 || ::poll(&pfd, 1, ms) != 1) return fail("no connection to " + to);
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return fail("connect to " + to + " failed: " + std::strerror(err));
  return s;
}

}  // namespace spark::net
