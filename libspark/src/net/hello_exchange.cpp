#include "net/hello_exchange.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "log/log.hpp"

namespace spark::net::hello {

namespace {

int ms_until(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}

// Moves all of `n` bytes before `deadline`, whether `fd` blocks or not.
bool move_all(int fd, std::byte* p, std::size_t n, bool out, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t k =
        out ? ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) return false;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd pfd{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    const int left = ms_until(deadline);
    if (left == 0 || ::poll(&pfd, 1, left) <= 0) return false;
  }
  return true;
}

std::string peer_of(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace

Waiting::Waiting(const Token& token, int size, std::string subsystem, bool log)
    : token_(token), size_(size), subsystem_(std::move(subsystem)), log_(log) {}

void Waiting::accept_from(int listener) {
  sockaddr_in from{};
  socklen_t len = sizeof from;
  Fd fd(
      ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (fd) pending_.push_back({std::move(fd), peer_of(from), Clock::now() + kHelloWait});
}

Clock::time_point Waiting::watch(std::vector<pollfd>& pfds, Clock::time_point until) const {
  for (const auto& p : pending_) {
    pfds.push_back({p.fd.get(), POLLIN, 0});
    until = std::min(until, p.until);
  }
  return until;
}

std::vector<Greeted> Waiting::take(const std::vector<pollfd>& pfds, std::size_t first) {
  std::vector<Greeted> out;
  const auto now = Clock::now();
  // Backwards, so erasing keeps the indices of the connections not yet looked at.
  for (std::size_t n = pending_.size(); n-- > 0;) {
    Pending& p = pending_[n];
    std::string why;
    bool done = false;
    if (first + n < pfds.size() && pfds[first + n].fd == p.fd.get() &&
        pfds[first + n].revents != 0) {
      const ssize_t r = ::recv(p.fd.get(), p.buf.data() + p.got, p.buf.size() - p.got, 0);
      if (r > 0) p.got += static_cast<std::size_t>(r);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        done = true;
        why = "closed before a whole hello (a port scan or an old probe?)";
      }
    }
    if (!done && p.got == p.buf.size()) {
      if (auto h = parse(p.buf, token_, size_, &why)) {
        out.push_back({std::move(p.fd), *h, std::move(p.from)});
        pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(n));
        continue;
      }
      done = true;
    }
    if (!done && now >= p.until) {
      done = true;
      why = "no hello within " + std::to_string(kHelloWait.count()) + " s";
    }
    if (done) {
      drop(p.fd.release(), p.from, why);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(n));
    }
  }
  return out;
}

void Waiting::drop(int fd, const std::string& from, const std::string& why) const {
  ::close(fd);
  if (log_) log::line(subsystem_, "dropped a connection from " + from + ": " + why);
}

void Waiting::drop_all(const std::string& why) {
  for (auto& p : pending_) drop(p.fd.release(), p.from, why);
  pending_.clear();
}

std::string ask(int fd, const Hello& mine, const Token& token, int size,
                Clock::time_point deadline) {
  Hello probe = mine;
  probe.kind = Kind::probe;
  auto bytes = encode(probe, token);
  if (!move_all(fd, bytes.data(), bytes.size(), true, deadline))
    return "the probe could not be sent";
  std::array<std::byte, kSize> back{};
  if (!move_all(fd, back.data(), back.size(), false, deadline))
    return "no answer to the job's hello (a silent peer, or a listener that is not this job's)";
  std::string why;
  const auto h = parse(back, token, size, &why);
  if (!h) return "the answer is not this job's hello: " + why;
  if (h->kind != Kind::probe || h->rank != mine.dst || h->dst != mine.rank || h->lane != mine.lane)
    return "the answer is not from " + std::to_string(mine.dst) + " to " +
           std::to_string(mine.rank) + " (an echo, or a listener that is not this job's)";
  return "";
}

bool answer(int fd, const Hello& asked, const Token& token, Clock::time_point deadline) {
  auto bytes = encode({Kind::probe, asked.dst, asked.lane, asked.rank}, token);
  return move_all(fd, bytes.data(), bytes.size(), true, deadline);
}

}  // namespace spark::net::hello
