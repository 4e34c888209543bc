#include "round_trips.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "log/log.hpp"
#include "net/hello_exchange.hpp"
#include "spark/error.hpp"

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include "verbs/verbs_error.hpp"
#endif

namespace spark::doctor {

using Clock = std::chrono::steady_clock;

namespace {

// Pause before asking again after the responder dropped the hello (see tcp_initiate).
constexpr int kAskAgainMs = 5;

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(left.count());
}

// An initiator's failure: what went wrong, with the peer and lane, the time it took and the
// window it had.
TripResult trip_failed(const std::string& what, const std::string& who, Clock::time_point t0,
                       std::chrono::milliseconds timeout) {
  TripResult r;
  r.error = what + " (" + who + ", after " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) +
            " ms, timeout " + std::to_string(timeout.count()) + " ms)";
  return r;
}

// Moves `n` bytes in or out of a non-blocking socket before `deadline`; "" or the reason.
std::string io_all(int fd, char* p, std::size_t n, bool out, Clock::time_point deadline) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t k =
        out ? ::send(fd, p + done, n - done, MSG_NOSIGNAL) : ::recv(fd, p + done, n - done, 0);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) return "connection closed by the peer";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    pollfd pfd{fd, static_cast<short>(out ? POLLOUT : POLLIN), 0};
    int left = ms_left(deadline);
    if (left == 0 || ::poll(&pfd, 1, left) == 0) return "timeout";
  }
  return "";
}

}  // namespace

void summarise(TripResult& r, std::vector<double> s) {
  r.done = static_cast<int>(s.size());
  if (s.empty()) return;
  std::sort(s.begin(), s.end());
  r.min_us = s.front();
  r.max_us = s.back();
  r.median_us = s[s.size() / 2];
}

net::Fd connect_with_hello(const fabric::Lane& from, std::uint32_t ipv4, int port,
                           const TripHello& hello, Clock::time_point deadline, std::string& why) {
  // No fence between tests: the responder may still be in its previous test on this lane,
  // which drops this hello (not the test it is in) by closing the connection. Closed before
  // the window ends: ask again shortly, until the responder gets to this test.
  for (;;) {
    why.clear();
    net::Fd s = net::connect_within(
        from.ipv4, ipv4, port,
        std::max(std::chrono::milliseconds(1), std::chrono::milliseconds(ms_left(deadline))), &why);
    if (!s) return s;
    int one = 1;
    ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    why = net::hello::ask(s.get(),
                          {net::hello::Kind::probe, hello.initiator, hello.index, hello.responder},
                          hello.token, hello.size, deadline);
    if (why.empty()) return s;
    char peek = 0;
    const ssize_t k = ::recv(s.get(), &peek, 1, MSG_PEEK | MSG_DONTWAIT);
    const bool dropped = k == 0 || (k < 0 && errno == ECONNRESET);
    if (!dropped || ms_left(deadline) <= kAskAgainMs) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(kAskAgainMs));
  }
}

TripResult tcp_initiate(const fabric::Lane& from, std::uint32_t ipv4, int port, int iters,
                        const TripHello& hello, std::chrono::milliseconds timeout,
                        const std::string& who) {
  TripResult r;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  auto fail = [&](const std::string& what) { return trip_failed(what, who, t0, timeout); };
  std::string why;
  net::Fd s = connect_with_hello(from, ipv4, port, hello, deadline, why);
  if (!s) return fail(why);
  const auto tag = static_cast<std::uint64_t>(hello.index);
  std::vector<double> samples;
  for (int k = 1; k <= iters; ++k) {
    std::uint64_t msg[2] = {tag, static_cast<std::uint64_t>(k)}, back[2] = {0, 0};
    auto t = Clock::now();
    std::string e = io_all(s.get(), reinterpret_cast<char*>(msg), sizeof msg, true, deadline);
    if (e.empty()) e = io_all(s.get(), reinterpret_cast<char*>(back), sizeof back, false, deadline);
    if (e == "timeout")
      return fail("no answer, round trip " + std::to_string(k) + " of " + std::to_string(iters));
    if (!e.empty()) return fail(e + ", round trip " + std::to_string(k));
    if (back[0] != msg[0] || back[1] != msg[1]) return fail("wrong echo");
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  summarise(r, std::move(samples));
  return r;
}

net::Fd accept_with_hello(const net::Listener& listener, const TripHello& hello,
                          Clock::time_point deadline, std::string& why) {
  // Every connection's hello is read side by side: a stranger, another job, or the initiator
  // of an earlier test on this lane that ran late is dropped, and this test's initiator is
  // still taken within the window.
  net::hello::Waiting waiting(hello.token, hello.size, "doctor",
                              log::enabled(log::Level::info, "doctor"));
  for (;;) {
    std::vector<pollfd> pfds{{listener.fd(), POLLIN, 0}};
    const int left = ms_left(waiting.watch(pfds, deadline));
    if (::poll(pfds.data(), pfds.size(), left) < 0 && errno != EINTR) {
      why = std::string("poll: ") + std::strerror(errno);
      return {};
    }
    for (auto& g : waiting.take(pfds, 1)) {
      const auto& h = g.hello;
      if (h.kind != net::hello::Kind::probe || h.rank != hello.initiator ||
          h.dst != hello.responder || h.lane != hello.index) {
        waiting.drop(g.fd.release(), g.from,
                     "a hello of this job for another test (rank " + std::to_string(h.rank) +
                         " -> " + std::to_string(h.dst) + ", link " + std::to_string(h.lane) +
                         "), not rank " + std::to_string(hello.initiator) + "'s link " +
                         std::to_string(hello.index));
        continue;
      }
      waiting.drop_all("its test's initiator came first");
      if (!net::hello::answer(g.fd.get(), h, hello.token, deadline)) {
        why = "the initiator closed before its answer";
        return {};
      }
      int one = 1;
      ::setsockopt(g.fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return std::move(g.fd);
    }
    if ((pfds[0].revents & POLLIN) != 0) waiting.accept_from(listener.fd());
    if (Clock::now() >= deadline) {
      waiting.drop_all("the test's window ended before its hello");
      why = "no connection from the initiator";
      return {};
    }
  }
}

std::string tcp_respond(const net::Listener& listener, int iters, const TripHello& hello,
                        std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string why;
  net::Fd fd = accept_with_hello(listener, hello, deadline, why);
  if (!fd) return why;
  std::string e;
  for (int k = 1; k <= iters && e.empty(); ++k) {
    char msg[16];
    e = io_all(fd.get(), msg, sizeof msg, false, deadline);
    if (e.empty()) e = io_all(fd.get(), msg, sizeof msg, true, deadline);
  }
  return e;
}

#ifdef SPARK_DOCTOR_HAVE_VERBS

RdmaLink::RdmaLink(RdmaLane& lane, std::uint32_t timeout_ms, std::uint64_t wr_id)
    : lane_(lane), wr_id_(wr_id), timeouts_(verbs::qp_timeouts(timeout_ms)) {
  buf_ = std::aligned_alloc(4096, 4096);
  if (buf_ == nullptr) throw Error("doctor: out of memory for an RDMA buffer");
  std::memset(buf_, 0, 4096);
  mr_ = verbs::register_memory(lane.pd, buf_, 4096);
  qp_ = verbs::create_rc_qp(lane.pd, lane.cq, 4);
  local_ = verbs::local_endpoint(lane, qp_, mr_, buf_, 64);
}

RdmaLink::~RdmaLink() {
  qp_.reset();
  mr_.reset();
  std::free(buf_);
}

std::vector<std::byte> RdmaLink::endpoint() const {
  return verbs::serialize(local_);
}

void RdmaLink::connect(std::span<const std::byte> remote, int peer) {
  remote_ = verbs::deserialize(remote);
  verbs::connect_rc_qp(qp_, local_, remote_, peer, timeouts_);
}

std::uint64_t RdmaLink::received() const noexcept {
  return std::atomic_ref<std::uint64_t>(*static_cast<std::uint64_t*>(buf_))
      .load(std::memory_order_acquire);
}

std::string RdmaLink::write(std::uint64_t value, Clock::time_point deadline) {
  auto* out = static_cast<std::uint64_t*>(buf_) + 8;
  *out = value;
  int rc = verbs::post_write(qp_.get(), wr_id_, out, 8, mr_->lkey, remote_.addr, remote_.rkey, true,
                             true);
  if (rc != 0) return verbs::call_failed("ibv_post_send", lane_.name, rc);
  for (;;) {
    ibv_wc wc[4];
    int n = ibv_poll_cq(lane_.cq.get(), 4, wc);
    if (n < 0) return verbs::call_failed("ibv_poll_cq", lane_.name, EIO);
    for (int i = 0; i < n; ++i) {
      if (wc[i].wr_id != wr_id_) continue;  // a late completion of an earlier, failed test
      if (wc[i].status != IBV_WC_SUCCESS)
        return "RDMA write failed: " + verbs::completion_error(wc[i]);
      return "";
    }
    if (Clock::now() >= deadline) return "timeout";
    ::sched_yield();
  }
}

TripResult RdmaLink::initiate(int iters, std::chrono::milliseconds timeout,
                              const std::string& who) {
  TripResult r;
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  auto fail = [&](const std::string& what) { return trip_failed(what, who, t0, timeout); };
  std::vector<double> samples;
  for (int k = 1; k <= iters; ++k) {
    const auto t = Clock::now();
    std::string e = write(static_cast<std::uint64_t>(k), deadline);
    if (e == "timeout")
      return fail("no write completion, round trip " + std::to_string(k) + " of " +
                  std::to_string(iters));
    if (!e.empty()) return fail(e + ", round trip " + std::to_string(k));
    while (received() != static_cast<std::uint64_t>(k)) {
      if (Clock::now() >= deadline)
        return fail("no answer, round trip " + std::to_string(k) + " of " + std::to_string(iters));
      ::sched_yield();
    }
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  summarise(r, std::move(samples));
  return r;
}

std::string RdmaLink::respond(int iters, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (int k = 1; k <= iters; ++k) {
    while (received() != static_cast<std::uint64_t>(k)) {
      if (Clock::now() >= deadline) return "no write from the initiator";
      ::sched_yield();
    }
    std::string e = write(static_cast<std::uint64_t>(k), deadline);
    if (!e.empty()) return e;
  }
  return "";
}

#endif

}  // namespace spark::doctor
