#include "transport/tcp/tcp_relay.hpp"
#include "record_fields.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/transport.hpp"

namespace spark::transport {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kDataFrame = 1;  // tcp_transport.cpp's data frame type (low byte of kind)

// One direction of a relayed connection: bytes read from `from` wait in `buf` for `to`.
struct Dir {
  int from = -1, to = -1;
  int from_rank = -1, to_rank = -1;
  const std::string* lane = nullptr;  // this node's lane toward `to`
  int next = -1;                      // the next relay toward `to_rank` (-1: `to` is it)
  const std::string* next_host = nullptr;
  std::unique_ptr<std::byte[]> buf;
  std::size_t cap = 0, head = 0, tail = 0;
  bool eof = false;           // `from` finished (FIN, reset or error)
  bool dead = false;          // `to` cannot be written any more: bytes are dropped
  bool shut = false;          // FIN passed on to `to`
  Clock::time_point since{};  // last write progress (or when bytes started waiting)
  // Frame tracking, only to name the sequence number in a stall record.
  MsgHeader hdr{};
  std::size_t hdr_got = 0;
  std::uint64_t payload_left = 0, seq = 0;
  std::uint32_t step = 0;

  bool pending() const { return tail > head && !dead; }
  bool done() const { return dead || (eof && tail == head); }

  void parse(const std::byte* p, std::size_t n) {
    while (n > 0) {
      if (payload_left > 0) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(n, payload_left));
        payload_left -= take;
        p += take;
        n -= take;
        continue;
      }
      const std::size_t take = std::min(n, sizeof(MsgHeader) - hdr_got);
      std::memcpy(reinterpret_cast<std::byte*>(&hdr) + hdr_got, p, take);
      hdr_got += take;
      p += take;
      n -= take;
      if (hdr_got == sizeof(MsgHeader)) {
        hdr_got = 0;
        if ((hdr.kind & 0xff) == kDataFrame) {
          payload_left = hdr.bytes;
          seq = hdr.seq;
          step = hdr.step;
        }
      }
    }
  }
};

}  // namespace

TcpRelay::TcpRelay(int rank, std::string host, std::vector<RelayPipe> pipes,
                   std::chrono::milliseconds timeout, OnFailure on_failure,
                   std::size_t buffer_bytes, TimeoutSource timeout_source)
    : rank_(rank),
      host_(std::move(host)),
      pipes_(std::move(pipes)),
      timeout_(timeout),
      on_failure_(std::move(on_failure)),
      timeout_source_(std::move(timeout_source)),
      buffer_bytes_(std::max<std::size_t>(buffer_bytes, 4096)) {
  for (auto& p : pipes_)
    for (int fd : {p.a_fd, p.b_fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    wake_[0] = wake_[1] = -1;  // destruction then relies on the idle bound alone
  }
  thread_ = std::thread([this] { run(); });
}

TcpRelay::~TcpRelay() {
  stopping_.store(true, std::memory_order_release);
  if (wake_[1] >= 0) {
    char c = 1;
    [[maybe_unused]] auto r = ::write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (auto& p : pipes_)
    for (int fd : {p.a_fd, p.b_fd})
      if (fd >= 0) ::close(fd);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void TcpRelay::run() noexcept {
  std::vector<Dir> dirs(pipes_.size() * 2);
  const auto start = Clock::now();
  for (std::size_t i = 0; i < pipes_.size(); ++i) {
    const RelayPipe& p = pipes_[i];
    Dir& ab = dirs[2 * i];
    Dir& ba = dirs[2 * i + 1];
    ab.from = p.a_fd, ab.to = p.b_fd, ab.from_rank = p.src, ab.to_rank = p.dst, ab.lane = &p.b_lane;
    ab.next = p.b_next, ab.next_host = &p.b_next_host;
    ba.from = p.b_fd, ba.to = p.a_fd, ba.from_rank = p.dst, ba.to_rank = p.src, ba.lane = &p.a_lane;
    ba.next = p.a_next, ba.next_host = &p.a_next_host;
    for (Dir* d : {&ab, &ba}) {
      d->cap = buffer_bytes_;  // allocated on first data: idle pairs cost no memory
      d->since = start;
    }
  }
  auto last_move = start;
  std::vector<pollfd> fds;
  for (;;) {
    if (timeout_source_) timeout_ = std::chrono::milliseconds(timeout_source_());
    const auto now = Clock::now();
    const bool all_done =
        std::all_of(dirs.begin(), dirs.end(), [](const Dir& d) { return d.done(); });
    const bool stopping = stopping_.load(std::memory_order_acquire);
    // Destruction: forward until both ends of every connection finished, or nothing moved for
    // the timeout (an end that lingers must not hold this process forever).
    if (all_done || (stopping && now - last_move >= timeout_)) break;

    fds.clear();
    if (wake_[0] >= 0 && !stopping) fds.push_back({wake_[0], POLLIN, 0});
    auto wake_at = Clock::time_point::max();
    for (Dir& d : dirs) {
      if (!d.eof && d.tail < d.cap) fds.push_back({d.from, POLLIN, 0});
      if (d.pending()) {
        fds.push_back({d.to, POLLOUT, 0});
        if (!failed_.load(std::memory_order_relaxed))
          wake_at = std::min(wake_at, d.since + timeout_);
      }
    }
    if (stopping) wake_at = std::min(wake_at, last_move + timeout_);
    int ms = -1;  // idle: sleep until a socket or the destructor wakes us
    if (wake_at != Clock::time_point::max())
      ms = static_cast<int>(std::clamp<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now).count() + 1, 0,
          1 << 30));
    if (::poll(fds.data(), fds.size(), ms) < 0 && errno != EINTR) {
      ::usleep(1000);  // cannot happen with valid fds; do not spin
    }
    if (wake_[0] >= 0 && stopping_.load(std::memory_order_acquire)) {
      char junk[16];
      while (::read(wake_[0], junk, sizeof junk) > 0) {
      }
    }

    const auto t = Clock::now();
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      Dir& d = dirs[i];
      // Read what `from` has (non-blocking; a stray wake-up costs one EAGAIN).
      if (!d.buf && !d.eof) d.buf = std::make_unique<std::byte[]>(d.cap);
      while (!d.eof && d.tail < d.cap) {
        ssize_t r = ::recv(d.from, d.buf.get() + d.tail, d.cap - d.tail, MSG_DONTWAIT);
        if (r > 0) {
          if (!d.pending()) d.since = t;
          d.parse(d.buf.get() + d.tail, static_cast<std::size_t>(r));
          d.tail += static_cast<std::size_t>(r);
          if (d.dead) d.head = d.tail = 0;  // nobody to deliver to: drop
          last_move = t;
          forwarded_.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed);
          continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r < 0 && errno == EINTR) continue;
        d.eof = true;  // FIN or reset: what was read is still delivered
        last_move = t;
      }
      // Write what is waiting.
      while (d.pending()) {
        ssize_t w =
            ::send(d.to, d.buf.get() + d.head, d.tail - d.head, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
          d.head += static_cast<std::size_t>(w);
          d.since = t;
          last_move = t;
          continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w < 0 && errno == EINTR) continue;
        // The destination side is gone: drop what it was sent. Its rank sees the close
        // through the other direction, which reads the end of this connection and passes the
        // FIN on after the bytes it still holds (a shutdown of `from` here would throw those
        // away: a finished rank's last message to a peer that is still waiting).
        d.dead = true;
        d.head = d.tail = 0;
        last_move = t;
      }
      if (d.head == d.tail) {
        d.head = d.tail = 0;
      } else if (d.tail == d.cap && d.head > 0) {
        std::memmove(d.buf.get(), d.buf.get() + d.head, d.tail - d.head);
        d.tail -= d.head;
        d.head = 0;
      }
      if (d.eof && d.head == d.tail && !d.shut && !d.dead) {
        ::shutdown(d.to, SHUT_WR);  // pass the FIN on
        d.shut = true;
      }
      if (d.pending() && t - d.since > timeout_ && !failed_.exchange(true)) {
        FailureRecord rec;
        rec.rank = rank_;
        rec.peer = d.to_rank;
        rec.seq = d.seq;
        rec.step = d.step;
        rec.waited_ms = static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(t - d.since).count());
        rec.timeout_ms = static_cast<std::uint32_t>(timeout_.count());
        rec.cause = FailureCause::timeout;
        stamp_now(rec);
        // The stalled side: the destination, or (multi-hop) the next relay toward it.
        const std::string taker =
            d.next >= 0 ? "next relay rank " + std::to_string(d.next) + " on " + *d.next_host
                        : "rank " + std::to_string(d.to_rank);
        set_texts(rec, *d.lane, "relay",
                  "relay on " + host_ + " for rank " + std::to_string(d.from_rank) + " -> rank " +
                      std::to_string(d.to_rank) + " stalled: " + taker + " takes no data");
        if (on_failure_) {
          try {
            on_failure_(rec);
          } catch (...) {  // the handler reports; a failure to report must not end the relay
          }
        }
      }
    }
  }
}

}  // namespace spark::transport
