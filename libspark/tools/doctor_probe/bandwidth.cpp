#include "bandwidth.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include <sched.h>

#include <atomic>
#include <cstdlib>

#include "verbs/verbs_error.hpp"
#endif

#include "fabric/fabric_map.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::doctor {

using Clock = std::chrono::steady_clock;

namespace {

constexpr char kStreamEndField = '\x1f';
constexpr std::size_t kChunk = 256 << 10;  // one send: large enough that syscalls do not limit

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  std::getline(in, v);
  return v;
}

std::int64_t read_number(const std::string& path) {
  const std::string v = read_line(path);
  std::int64_t x = -1;
  if (protocol::parse_integer(v, INT64_MIN, INT64_MAX, x) != protocol::Integer::ok) return -1;
  return x;
}

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes; false on the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int left = ms_until(deadline);
    if (left == 0) return false;
    const int n = ::poll(&p, 1, left);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

std::string percent_text(double p) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", p);
  return b;
}

std::string bytes_text(std::int64_t b) {
  char out[32];
  if (b < 0) return "?";
  if (b >= (1ll << 30))
    std::snprintf(out, sizeof out, "%.2f GiB", static_cast<double>(b) / (1ll << 30));
  else
    std::snprintf(out, sizeof out, "%.1f MiB", static_cast<double>(b) / (1ll << 20));
  return out;
}

}  // namespace

std::vector<Stream> plan_streams(const std::vector<RankLanes>& ranks) {
  const int size = static_cast<int>(ranks.size());
  auto first_of_host = [&](int r) {
    for (int q = 0; q < r; ++q)
      if (ranks[static_cast<std::size_t>(q)].host == ranks[static_cast<std::size_t>(r)].host)
        return false;
    return true;
  };
  std::vector<Stream> out;
  for (const auto& round : plan_rounds(size))
    for (auto [a, b] : round) {
      const auto& ra = ranks[static_cast<std::size_t>(a)];
      const auto& rb = ranks[static_cast<std::size_t>(b)];
      if (ra.host == rb.host || !first_of_host(a) || !first_of_host(b)) continue;
      const bool rdma = !ra.rdma.empty() && !rb.rdma.empty();
      const auto& xa = rdma ? ra.rdma : ra.tcp;
      const auto& xb = rdma ? rb.rdma : rb.tcp;
      const auto kind = rdma ? LinkKind::rdma : LinkKind::tcp;
      std::vector<std::pair<int, int>> pairs;
      std::set<int> used_a, used_b;
      for (std::size_t la = 0; la < xa.size(); ++la)
        for (std::size_t lb = 0; lb < xb.size(); ++lb) {
          if (!lanes_pair(xa[la], ra.host, xb[lb], rb.host)) continue;
          pairs.emplace_back(static_cast<int>(la), static_cast<int>(lb));
          used_a.insert(static_cast<int>(la));
          used_b.insert(static_cast<int>(lb));
          for (bool a_sends : {true, false})
            out.push_back({a, b, static_cast<int>(la), static_cast<int>(lb), a_sends, kind, {}});
        }
      // Striped only where each lane is in one pair: a lane's listener serves one stream.
      if (pairs.size() >= 2 && used_a.size() == pairs.size() && used_b.size() == pairs.size())
        for (bool a_sends : {true, false})
          out.push_back({a, b, pairs[0].first, pairs[0].second, a_sends, kind, pairs});
    }
  return out;
}

std::string encode_stream_ends(const std::vector<StreamEnd>& ends) {
  std::string out;
  for (const StreamEnd& e : ends) {
    char secs[64];
    auto r = std::to_chars(secs, secs + sizeof secs, e.seconds);
    std::string err = e.error;
    for (char& c : err)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += std::to_string(e.test) + kStreamEndField + (e.sender ? "tx" : "rx") + kStreamEndField +
           e.netdev + kStreamEndField + std::to_string(e.payload) + kStreamEndField +
           std::to_string(e.counter) + kStreamEndField + std::to_string(e.port_counter) +
           kStreamEndField + std::string(secs, r.ptr) + kStreamEndField +
           std::to_string(e.link_mbps) + kStreamEndField + std::to_string(e.mtu) + kStreamEndField +
           err + '\n';
  }
  return out;
}

std::vector<StreamEnd> decode_stream_ends(const std::string& text) {
  std::vector<StreamEnd> ends;
  for (const auto line : fabric::split(text, '\n')) {
    if (line.empty()) continue;
    const auto f = fabric::split(line, kStreamEndField);
    auto bad = [&](const std::string& what) {
      return Error("doctor: malformed stream line from a rank (" + what + "): '" +
                   std::string(line) + "'");
    };
    if (f.size() != 10) throw bad("10 fields expected");
    StreamEnd e;
    std::int64_t v = 0;
    auto number = [&](std::string_view s, std::int64_t lo, std::int64_t hi) {
      if (protocol::parse_integer(s, lo, hi, v) != protocol::Integer::ok) throw bad(std::string(s));
      return v;
    };
    e.test = static_cast<int>(number(f[0], 0, INT32_MAX));
    if (f[1] != "tx" && f[1] != "rx") throw bad("direction");
    e.sender = f[1] == "tx";
    e.netdev = f[2];
    e.payload = static_cast<std::uint64_t>(number(f[3], 0, INT64_MAX));
    e.counter = number(f[4], -1, INT64_MAX);
    e.port_counter = number(f[5], -1, INT64_MAX);
    const auto end = f[6].data() + f[6].size();
    if (std::from_chars(f[6].data(), end, e.seconds).ptr != end || e.seconds < 0)
      throw bad("seconds");
    e.link_mbps = number(f[7], -1, INT64_MAX);
    e.mtu = static_cast<int>(number(f[8], 0, 1 << 20));
    e.error = f[9];
    ends.push_back(std::move(e));
  }
  return ends;
}

std::string format_rate(double gbps) {
  char b[32];
  if (gbps >= 1)
    std::snprintf(b, sizeof b, "%.2f Gb/s", gbps);
  else
    std::snprintf(b, sizeof b, "%.0f Mb/s", gbps * 1000);
  return b;
}

Measured measured(const StreamEnd& tx, const StreamEnd& rx) {
  if (rx.seconds > 0 || tx.seconds <= 0) return {rx.payload, rx.seconds};
  return {tx.payload, tx.seconds};
}

std::pair<double, std::string> reference_rate(const StreamEnd& tx, const StreamEnd& rx,
                                              const BandwidthLimits& limits, double fastest_gbps) {
  if (limits.link_gbps) return {*limits.link_gbps, "--link-gbps"};
  std::int64_t mbps = -1;
  for (const auto* e : {&tx, &rx})
    if (e->link_mbps > 0) mbps = mbps < 0 ? e->link_mbps : std::min(mbps, e->link_mbps);
  if (mbps > 0 && !limits.relative) return {static_cast<double>(mbps) / 1000, "link speed"};
  if (fastest_gbps > 0) return {fastest_gbps, "the fastest direction of this run"};
  return {0, "nothing"};
}

StreamEnd combine_ends(const std::vector<StreamEnd>& ends) {
  StreamEnd c;
  if (ends.empty()) return c;
  c.test = ends[0].test;
  c.sender = ends[0].sender;
  c.counter = 0;
  c.mtu = ends[0].mtu;
  for (const StreamEnd& e : ends) {
    c.netdev += (c.netdev.empty() ? "" : "+") + e.netdev;
    c.payload += e.payload;
    c.counter = c.counter < 0 || e.counter < 0 ? -1 : c.counter + e.counter;
    c.port_counter = &e == &ends.front()                        ? e.port_counter
                     : c.port_counter < 0 || e.port_counter < 0 ? -1
                                                                : c.port_counter + e.port_counter;
    c.seconds = std::max(c.seconds, e.seconds);
    c.mtu = std::min(c.mtu, e.mtu);
    if (!e.error.empty()) c.error += (c.error.empty() ? "" : "; ") + e.netdev + ": " + e.error;
  }
  return c;
}

CableResult judge_stream(const std::string& from, const std::string& to, const std::string& lane,
                         const StreamEnd& tx, const StreamEnd& rx, const BandwidthLimits& limits,
                         double fastest_gbps, const std::pair<double, std::string>* reference) {
  CableResult c;
  c.from = from;
  c.to = to;
  c.lane = lane;
  c.tx_netdev = tx.netdev;
  c.rx_netdev = rx.netdev;
  const Measured m = measured(tx, rx);
  const std::uint64_t payload = m.payload;
  c.payload = payload;
  c.tx_bytes = tx.counter;
  c.rx_bytes = rx.counter;
  c.tx_port_bytes = tx.port_counter;
  c.rx_port_bytes = rx.port_counter;
  c.tx_mtu = tx.mtu;
  c.rx_mtu = rx.mtu;
  c.gbps = m.gbps();
  std::tie(c.reference_gbps, c.reference) =
      reference != nullptr ? *reference : reference_rate(tx, rx, limits, fastest_gbps);
  c.striped = reference != nullptr;
  c.percent = c.reference_gbps > 0 ? c.gbps / c.reference_gbps * 100 : 0;
  std::string counters = "left " + tx.netdev + " +" + bytes_text(tx.counter) + ", arrived on " +
                         rx.netdev + " +" + bytes_text(rx.counter);
  if (tx.port_counter >= 0 || rx.port_counter >= 0)
    counters += " (RDMA ports +" + bytes_text(tx.port_counter) + " out, +" +
                bytes_text(rx.port_counter) + " in)";
  if (!tx.error.empty() || !rx.error.empty()) {
    c.status = Status::fail;
    c.detail = from + " -> " + to + ": " + (tx.error.empty() ? "" : "sender: " + tx.error) +
               (!tx.error.empty() && !rx.error.empty() ? "; " : "") +
               (rx.error.empty() ? "" : "receiver: " + rx.error);
    return c;
  }
  if (payload == 0) {
    c.status = Status::fail;
    c.detail = from + " -> " + to + ": no byte arrived";
    return c;
  }
  // A counter below the payload: the bytes did not use this interface (another cable carried
  // them, or a bond / bridge hides them). Unread counters (no sysfs entry) are only said.
  const auto short_of = [&](std::int64_t counter) {
    return counter >= 0 && static_cast<std::uint64_t>(counter) < payload;
  };
  const std::string rate = format_rate(c.gbps);
  if (short_of(tx.counter) || short_of(rx.counter) || short_of(tx.port_counter) ||
      short_of(rx.port_counter)) {
    c.status = Status::fail;
    c.detail = from + " -> " + to + " " + rate + ", but the counters do not show the " +
               bytes_text(static_cast<std::int64_t>(payload)) + " on this lane's interfaces (" +
               counters + "): the traffic took another path; check the addresses and routes of " +
               lane;
    return c;
  }
  std::string judged = "no reference rate";
  if (c.reference_gbps > 0) {
    judged =
        percent_text(c.percent) + " of " + format_rate(c.reference_gbps) + " (" + c.reference + ")";
    if (c.percent < limits.fail_below)
      c.status = Status::fail;
    else if (c.percent < limits.warn_below)
      c.status = Status::warn;
  }
  c.detail = from + " -> " + to + " " + rate + ", " + judged + "; " + counters;
  if (c.status == Status::fail)
    c.detail += "; below " + percent_text(limits.fail_below) +
                ": a slow link (speed, cable, a port that trained low) or a policer";
  else if (c.status == Status::warn)
    c.detail += "; below " + percent_text(limits.warn_below);
  return c;
}

JobRow cable_row(const std::string& host, int rank, const CableResult& c) {
  JobRow r;
  r.host = host;
  r.rank = rank;
  r.check = c.striped ? "striped" : "bandwidth";
  r.lane = c.lane;
  r.peer = c.to;
  r.status = c.status;
  r.detail = c.detail;
  return r;
}

std::int64_t netdev_bytes(const std::string& sysfs, const std::string& netdev, bool tx) {
  if (netdev.empty()) return -1;
  return read_number(sysfs + "/class/net/" + netdev + "/statistics/" +
                     (tx ? "tx_bytes" : "rx_bytes"));
}

std::int64_t rdma_port_bytes(const std::string& sysfs, const std::string& device, int port,
                             bool tx) {
  const std::int64_t words =
      read_number(sysfs + "/class/infiniband/" + device + "/ports/" + std::to_string(port) +
                  "/counters/" + (tx ? "port_xmit_data" : "port_rcv_data"));
  return words < 0 ? -1 : words * 4;
}

std::int64_t netdev_speed_mbps(const std::string& sysfs, const std::string& netdev) {
  if (netdev.empty()) return -1;
  const std::int64_t s = read_number(sysfs + "/class/net/" + netdev + "/speed");
  return s > 0 ? s : -1;
}

int netdev_mtu(const std::string& sysfs, const std::string& netdev) {
  if (netdev.empty()) return 0;
  const std::int64_t m = read_number(sysfs + "/class/net/" + netdev + "/mtu");
  return m > 0 && m < (1 << 20) ? static_cast<int>(m) : 0;
}

std::string rdma_netdev(const std::string& sysfs, const std::string& device, int port,
                        int gid_index) {
  if (gid_index < 0) return "";
  return read_line(sysfs + "/class/infiniband/" + device + "/ports/" + std::to_string(port) +
                   "/gid_attrs/ndevs/" + std::to_string(gid_index));
}

namespace {

// An end of stream `test` on `netdev`, with the interface's speed and MTU.
StreamEnd stream_end(int test, bool sender, const std::string& sysfs, const std::string& netdev) {
  StreamEnd e;
  e.test = test;
  e.sender = sender;
  e.netdev = netdev;
  e.link_mbps = netdev_speed_mbps(sysfs, netdev);
  e.mtu = netdev_mtu(sysfs, netdev);
  return e;
}

}  // namespace

StreamEnd stream_send(int fd, int test, const std::string& sysfs, const std::string& netdev,
                      std::chrono::milliseconds seconds, Clock::time_point deadline) {
  StreamEnd e = stream_end(test, true, sysfs, netdev);
  // The receiver's go: it has read its counter, so every byte from here on is counted.
  char go = 0;
  if (!wait_ready(fd, POLLIN, deadline) || ::recv(fd, &go, 1, 0) != 1) {
    e.error = "no go from the receiver";
    return e;
  }
  const std::int64_t before = netdev_bytes(sysfs, netdev, true);
  std::vector<char> chunk(kChunk, '\x5a');
  const auto stop = std::min(Clock::now() + seconds, deadline);
  while (Clock::now() < stop) {
    const ssize_t k = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      e.payload += static_cast<std::uint64_t>(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      e.error = std::string("send: ") + std::strerror(errno);
      return e;
    }
    pollfd p{fd, POLLOUT, 0};
    ::poll(&p, 1, std::max(1, std::min(ms_until(stop), 50)));
  }
  ::shutdown(fd, SHUT_WR);
  // The receiver closes once it has every byte: then the counter holds the whole stream.
  while (wait_ready(fd, POLLIN, deadline)) {
    char sink[64];
    const ssize_t k = ::recv(fd, sink, sizeof sink, 0);
    if (k == 0) break;
    if (k < 0 && errno != EINTR && errno != EAGAIN) break;
  }
  const std::int64_t after = netdev_bytes(sysfs, netdev, true);
  if (before >= 0 && after >= before) e.counter = after - before;
  if (Clock::now() >= deadline) e.error = "the receiver did not confirm the end of the stream";
  return e;
}

StreamEnd stream_receive(int fd, int test, const std::string& sysfs, const std::string& netdev,
                         Clock::time_point deadline) {
  StreamEnd e = stream_end(test, false, sysfs, netdev);
  const std::int64_t before = netdev_bytes(sysfs, netdev, false);
  const char go = 1;
  if (::send(fd, &go, 1, MSG_NOSIGNAL) != 1) {
    e.error = std::string("send: ") + std::strerror(errno);
    return e;
  }
  std::vector<char> buf(kChunk);
  Clock::time_point first{}, last{};
  // What the sender queued may take longer than its --seconds to arrive on a slow link (its
  // socket buffer holds megabytes): the rate is then measured on what arrived by shortly before
  // the window ends, and closing tells the sender the stream is over.
  const auto stop = deadline - std::chrono::milliseconds(300);
  for (;;) {
    if (!wait_ready(fd, POLLIN, stop)) {
      if (e.payload == 0) e.error = "no byte of the stream within its window";
      break;
    }
    const ssize_t k = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (k > 0) {
      if (e.payload == 0) first = Clock::now();
      e.payload += static_cast<std::uint64_t>(k);
      last = Clock::now();
      continue;
    }
    if (k == 0) break;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
    e.error = std::string("recv: ") + std::strerror(errno);
    break;
  }
  // The rate from the first byte: the connection's own start is not part of the cable's.
  if (e.payload > 0) e.seconds = std::chrono::duration<double>(last - first).count();
  const std::int64_t after = netdev_bytes(sysfs, netdev, false);
  if (before >= 0 && after >= before) e.counter = after - before;
  return e;
}

#ifdef SPARK_DOCTOR_HAVE_VERBS

namespace {

// The buffer: a control page (word 0: "go", written by the receiver into the sender's; word 1:
// "done" = the byte count + 1, written by the sender into the receiver's), then the data.
constexpr std::size_t kControl = 4096;
constexpr std::size_t kData = 4 << 20;
constexpr std::uint32_t kWrite = 1 << 20;  // one RDMA WRITE: large, so posting does not limit
constexpr int kStreamDepth = 4;            // writes in flight

}  // namespace

RdmaStream::RdmaStream(verbs::OpenPort& lane, std::uint32_t timeout_ms, std::uint64_t wr_id)
    : lane_(lane), wr_id_(wr_id), timeouts_(verbs::qp_timeouts(timeout_ms)) {
  buf_ = std::aligned_alloc(4096, kControl + kData);
  if (buf_ == nullptr) throw Error("doctor: out of memory for an RDMA stream buffer");
  std::memset(buf_, 0, kControl + kData);
  mr_ = verbs::register_memory(lane.pd, buf_, kControl + kData);
  qp_ = verbs::create_rc_qp(lane.pd, lane.cq, kStreamDepth + 2);
  local_ = verbs::local_endpoint(lane, qp_, mr_, buf_, kControl + kData);
}

RdmaStream::~RdmaStream() {
  qp_.reset();
  mr_.reset();
  std::free(buf_);
}

std::vector<std::byte> RdmaStream::endpoint() const {
  return verbs::serialize(local_);
}

void RdmaStream::connect(std::span<const std::byte> remote, int peer) {
  remote_ = verbs::deserialize(remote);
  verbs::connect_rc_qp(qp_, local_, remote_, peer, timeouts_);
}

std::uint64_t RdmaStream::word(int i) const noexcept {
  return std::atomic_ref<std::uint64_t>(static_cast<std::uint64_t*>(buf_)[i])
      .load(std::memory_order_acquire);
}

int RdmaStream::post(std::size_t offset, std::uint32_t len, std::uint64_t wr_id) {
  return verbs::post_write(qp_.get(), wr_id, static_cast<char*>(buf_) + offset, len, mr_->lkey,
                           remote_.addr + offset, remote_.rkey, true, false);
}

std::string RdmaStream::reap(int n, Clock::time_point deadline) {
  while (n > 0) {
    ibv_wc wc[8];
    const int k = ibv_poll_cq(lane_.cq.get(), 8, wc);
    if (k < 0) return verbs::call_failed("ibv_poll_cq", lane_.name, EIO);
    for (int i = 0; i < k; ++i) {
      if (wc[i].wr_id != wr_id_) continue;  // another test's late completion
      if (wc[i].status != IBV_WC_SUCCESS)
        return "RDMA write failed: " + verbs::completion_error(wc[i]);
      --n;
    }
    if (k == 0) {
      if (Clock::now() >= deadline) return "no write completion within the window";
      ::sched_yield();
    }
  }
  return "";
}

StreamEnd RdmaStream::send(int test, const std::string& sysfs, const std::string& netdev,
                           std::chrono::milliseconds seconds, Clock::time_point deadline) {
  StreamEnd e = stream_end(test, true, sysfs, netdev);
  while (word(0) == 0) {
    if (Clock::now() >= deadline) {
      e.error = "no go from the receiver";
      return e;
    }
    ::sched_yield();
  }
  const std::int64_t before = netdev_bytes(sysfs, netdev, true);
  const std::int64_t port_before = rdma_port_bytes(sysfs, lane_.name, lane_.port, true);
  const auto first = Clock::now();
  const auto stop = std::min(first + seconds, deadline);
  // A slow link may not drain what is in flight by the window's end: the rate is then what
  // completed, measured here, and the QP goes (with what it still holds) when the stream ends.
  const auto drained = deadline - std::chrono::milliseconds(300);
  auto last = first;
  int in_flight = 0;
  std::size_t next = 0;
  auto complete_one = [&](Clock::time_point until) {
    std::string why = reap(1, until);
    if (why.empty()) {
      --in_flight;
      e.payload += kWrite;
      last = Clock::now();
    }
    return why;
  };
  while (Clock::now() < stop) {
    while (in_flight < kStreamDepth) {
      if (int rc = post(kControl + next, kWrite, wr_id_); rc != 0) {
        e.error = verbs::call_failed("ibv_post_send", lane_.name, rc);
        return e;
      }
      next = (next + kWrite) % kData;
      ++in_flight;
    }
    if (std::string why = complete_one(drained); !why.empty()) {
      if (why.rfind("no write completion", 0) != 0) e.error = why;
      break;
    }
  }
  while (in_flight > 0 && e.error.empty()) {
    std::string why = complete_one(drained);
    if (why.empty()) continue;
    if (why.rfind("no write completion", 0) != 0) e.error = why;
    break;
  }
  e.seconds = std::chrono::duration<double>(last - first).count();
  if (in_flight > 0) {
    // Writes still queued behind a slow link: the error state flushes them at once (their
    // completions carry this stream's id, which no other test takes for its own), so neither
    // rxe's retries nor the QP's destruction outlive the window.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE);
  }
  if (in_flight == 0 && e.error.empty()) {
    // "done": the count, + 1 so that an empty stream is still an answer.
    std::atomic_ref<std::uint64_t>(static_cast<std::uint64_t*>(buf_)[1]) = e.payload + 1;
    if (int rc = post(8, 8, wr_id_); rc != 0)
      e.error = verbs::call_failed("ibv_post_send", lane_.name, rc);
    else if (std::string why = reap(1, deadline); !why.empty())
      e.error = why;
  }
  const std::int64_t after = netdev_bytes(sysfs, netdev, true);
  if (before >= 0 && after >= before) e.counter = after - before;
  const std::int64_t port_after = rdma_port_bytes(sysfs, lane_.name, lane_.port, true);
  if (port_before >= 0 && port_after >= port_before) e.port_counter = port_after - port_before;
  return e;
}

StreamEnd RdmaStream::receive(int test, const std::string& sysfs, const std::string& netdev,
                              Clock::time_point deadline) {
  StreamEnd e = stream_end(test, false, sysfs, netdev);
  const std::int64_t before = netdev_bytes(sysfs, netdev, false);
  const std::int64_t port_before = rdma_port_bytes(sysfs, lane_.name, lane_.port, false);
  std::atomic_ref<std::uint64_t>(static_cast<std::uint64_t*>(buf_)[0]) = 1;
  const auto go = Clock::now();
  if (int rc = post(0, 8, wr_id_); rc != 0) {
    e.error = verbs::call_failed("ibv_post_send", lane_.name, rc);
    return e;
  }
  if (std::string why = reap(1, deadline); !why.empty()) {
    e.error = why;
    return e;
  }
  // Until the sender's "done", or shortly before the window ends (a slow link: then the
  // sender's own measurement counts, and this end only reads its counter).
  const auto stop = deadline - std::chrono::milliseconds(300);
  while (word(1) == 0 && Clock::now() < stop) ::sched_yield();
  if (word(1) != 0) {
    e.payload = word(1) - 1;
    e.seconds = std::chrono::duration<double>(Clock::now() - go).count();
  }
  const std::int64_t after = netdev_bytes(sysfs, netdev, false);
  if (before >= 0 && after >= before) e.counter = after - before;
  const std::int64_t port_after = rdma_port_bytes(sysfs, lane_.name, lane_.port, false);
  if (port_before >= 0 && port_after >= port_before) e.port_counter = port_after - port_before;
  return e;
}

#endif

}  // namespace spark::doctor
