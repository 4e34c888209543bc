// The ring relay (docs/fabric.md) on real sockets: forwarding both ways, a stalled destination
// reported once with the relaying rank, lane and sequence, bounded destruction; and the relay
// path of the 4-ring and a 6-ring (multi-hop) from the fabric map.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/tcp/tcp_relay.hpp"
#include "transport/tcp/tcp_transport.hpp"

using namespace spark;
using namespace spark::transport;
using Clock = std::chrono::steady_clock;

namespace {

struct Pair {
  int fd[2] = {-1, -1};
  Pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  int take(int i) {  // hand one end to the relay (it closes it)
    int f = fd[i];
    fd[i] = -1;
    return f;
  }
};

bool write_all(int fd, const void* p, std::size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = ::send(fd, c, n, MSG_NOSIGNAL);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) != 1) return false;
    ssize_t r = ::recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

TEST(Relay, ForwardsBothWaysAndEndsWhenBothSidesClose) {
  Pair src, dst;  // src.fd[0]: rank 0's socket; src.fd[1]: the relay's inbound end
  std::vector<RelayPipe> pipes{{src.take(1), dst.take(1), 0, 2, "tcp:to0", "tcp:to2"}};
  int calls = 0;
  auto relay = std::make_unique<TcpRelay>(
      1, "n1", std::move(pipes), std::chrono::milliseconds(5000),
      [&](const FailureRecord&) { ++calls; }, 64 * 1024);
  std::vector<unsigned char> out(3 << 20), back(out.size()), in(out.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<unsigned char>(i * 7 + i / 4096);
  std::thread writer([&] { EXPECT_TRUE(write_all(src.fd[0], out.data(), out.size())); });
  ASSERT_TRUE(read_all(dst.fd[0], in.data(), in.size()));
  writer.join();
  EXPECT_EQ(in, out);
  // And back: dst -> src.
  std::thread writer2([&] { EXPECT_TRUE(write_all(dst.fd[0], in.data(), 100000)); });
  ASSERT_TRUE(read_all(src.fd[0], back.data(), 100000));
  writer2.join();
  EXPECT_EQ(std::memcmp(back.data(), out.data(), 100000), 0);
  EXPECT_GE(relay->forwarded(), out.size() + 100000);
  // src closes: the FIN reaches dst; then dst closes; the relay finishes without its timeout.
  ::close(src.take(0));
  char c;
  pollfd pfd{dst.fd[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
  EXPECT_EQ(::recv(dst.fd[0], &c, 1, 0), 0) << "the source's close passes through the relay";
  ::close(dst.take(0));
  const auto t0 = Clock::now();
  relay.reset();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(calls, 0);
}

namespace {
// Rank 0 sends data frames (seq 41, 42, ...) through relay rank 1 on host n1 toward `dst_rank`;
// the far side never reads. Returns what the relay reported (after a pause that would show a
// second report).
std::vector<FailureRecord> stall_records(int dst_rank, std::string b_lane, int b_next,
                                         std::string b_next_host) {
  Pair src, dst;
  int small = 16 * 1024;
  for (int f : {src.fd[0], src.fd[1], dst.fd[0], dst.fd[1]}) {
    ::setsockopt(f, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    ::setsockopt(f, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  }
  std::mutex mu;
  std::vector<FailureRecord> got;
  RelayPipe pipe{src.take(1), dst.take(1), 0, dst_rank, "tcp:to0", std::move(b_lane)};
  pipe.b_next = b_next;
  pipe.b_next_host = std::move(b_next_host);
  std::vector<RelayPipe> pipes;
  pipes.push_back(std::move(pipe));
  // Created with 60 s, then the communicator's timeout (the source) says 300 ms: the relay
  // follows set_timeout_ms.
  auto relay = std::make_unique<TcpRelay>(
      1, "n1", std::move(pipes), std::chrono::milliseconds(60000),
      [&](const FailureRecord& r) {
        std::lock_guard lock(mu);
        got.push_back(r);
      },
      64 * 1024, [] { return std::uint32_t{300}; });
  // Rank 0 sends data frames (seq 41, 42, ...) that rank 2 never reads.
  ::fcntl(src.fd[0], F_SETFL, ::fcntl(src.fd[0], F_GETFL) | O_NONBLOCK);
  std::vector<unsigned char> frame(sizeof(MsgHeader) + 8192);
  const auto until = Clock::now() + std::chrono::seconds(20);
  for (std::uint64_t seq = 41; Clock::now() < until; ++seq) {
    MsgHeader h;
    h.seq = seq;
    h.step = 1;
    h.bytes = 8192;
    h.kind = 1;
    std::memcpy(frame.data(), &h, sizeof h);
    std::size_t off = 0;
    while (off < frame.size() && Clock::now() < until) {
      ssize_t r = ::send(src.fd[0], frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
      if (r > 0) {
        off += static_cast<std::size_t>(r);
        continue;
      }
      {
        std::lock_guard lock(mu);
        if (!got.empty()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard lock(mu);
    if (!got.empty()) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // a second stall is not reported
  EXPECT_TRUE(relay->failed());
  std::lock_guard lock(mu);
  return got;
}
}  // namespace

TEST(Relay, StalledDestinationIsReportedOnceWithRelayLaneAndSeqAfterTheCurrentTimeout) {
  const auto got = stall_records(2, "tcp:to2", -1, "");
  ASSERT_EQ(got.size(), 1u) << "a stalled relay reports exactly once";
  const FailureRecord& r = got[0];
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.peer, 2);
  EXPECT_GE(r.seq, 41u);
  EXPECT_EQ(r.step, 1u);
  EXPECT_GE(r.waited_ms, 300u);
  const std::string line = to_string(r);
  EXPECT_NE(line.find("rank 1: relay seq "), std::string::npos) << line;
  EXPECT_NE(line.find("on lane tcp:to2"), std::string::npos) << line;
  EXPECT_NE(line.find("relay on n1 for rank 0 -> rank 2 stalled: rank 2 takes no data"),
            std::string::npos)
      << line;
}

// Multi-hop (a line 0-1-2-3-4): relay 1's next hop toward rank 4 is relay 2, which the
// record names (rank and host; the lane is the compact relayed name).
TEST(Relay, StalledNextRelayIsNamedWithItsHost) {
  const auto got = stall_records(4, relayed_lane_name(2, "to2"), 2, "n2-with-a-long-host-name");
  ASSERT_EQ(got.size(), 1u);
  const std::string line = to_string(got[0]);
  EXPECT_EQ(got[0].peer, 4);
  EXPECT_NE(line.find("no data from rank 4 on lane tcp:via r2/to2 after"), std::string::npos)
      << line;
  EXPECT_NE(line.find("[relay on n1 for rank 0 -> rank 4 stalled: next relay rank 2 on "
                      "n2-with-a-long-host-name takes no data]"),
            std::string::npos)
      << line;
}

TEST(Relay, DestructionIsBoundedWhenTheEndsLinger) {
  Pair src, dst;  // both ends stay open and idle
  std::vector<RelayPipe> pipes{{src.take(1), dst.take(1), 0, 2, "tcp:to0", "tcp:to2"}};
  const auto t0 = Clock::now();
  auto relay = std::make_unique<TcpRelay>(1, "n1", std::move(pipes), std::chrono::milliseconds(300),
                                          nullptr, 4096);
  relay.reset();
  const auto took = Clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(250)) << "it waits for the ends (idle bound)";
  EXPECT_LT(took, std::chrono::seconds(5));
}

namespace {
// A ring of n nodes, one rank each, node i cabled to i+1 (mod n); `closed` false: a line
// (no cable between the last node and node 0).
TcpFabric ring_fabric(int n, bool closed = true) {
  std::vector<std::vector<fabric::Lane>> lanes(static_cast<std::size_t>(n));
  for (int i = 0; i < (closed ? n : n - 1); ++i) {
    // cable k = (i, i+1): 10.7.k.1 on i ("p0"), 10.7.k.2 on i+1 ("p1")
    auto ip = [](int k, int host) {
      return (10u << 24) | (7u << 16) | (static_cast<std::uint32_t>(k) << 8) |
             static_cast<std::uint32_t>(host);
    };
    lanes[static_cast<std::size_t>(i)].push_back({"p0", 0, ip(i, 1), 30});
    lanes[static_cast<std::size_t>((i + 1) % n)].push_back({"p1", 1, ip(i, 2), 30});
  }
  TcpFabric f;
  f.map = fabric::build_map(lanes, [](int, int, int, int) { return true; });
  f.lanes = lanes;
  for (int i = 0; i < n; ++i) {
    f.hosts.push_back("n" + std::to_string(i));
    f.node_of.push_back(i);
    f.speaker.push_back(i);
    f.ports.push_back(1000 + i);
  }
  return f;
}
}  // namespace

TEST(RelayPath, FourRingOppositeNodesGoThroughTheLowerNeighbour) {
  auto f = ring_fabric(4);
  EXPECT_TRUE(relay_path(f, 1, 0).empty());
  EXPECT_EQ(relay_path(f, 2, 0), std::vector<int>{1});
  EXPECT_EQ(relay_path(f, 3, 1), std::vector<int>{0});
  EXPECT_EQ(relay_path(f, 0, 2), std::vector<int>{1});
}

TEST(RelayPath, SixRingChainsTwoRelays) {
  auto f = ring_fabric(6);
  EXPECT_EQ(relay_path(f, 3, 0), (std::vector<int>{2, 1}));
  EXPECT_EQ(relay_path(f, 0, 3), (std::vector<int>{1, 2}));
  EXPECT_EQ(relay_path(f, 5, 1), std::vector<int>{0});
}

// FailureRecord::lane holds 31 characters: a relayed lane is named compactly (relaying rank
// and this node's lane, both in full even at their longest) and the relaying host, however
// long, goes into the detail, so the one-line report names all three.
TEST(RelayRecord, LongHostNamesStayWholeInTheDetailAndTheLaneFits) {
  const std::string lane = "enP2p1s0f1np1xy";  // 15 characters: the longest interface name
  const std::string name = relayed_lane_name(999999, lane);
  EXPECT_EQ(name, "tcp:via r999999/" + lane);
  FailureRecord r;
  EXPECT_LE(name.size(), sizeof r.lane - 1);
  const std::string host = "spark-rack-07-node-13.cluster.example.internal";
  const std::string detail = relayed_lane_detail(host, 1);
  EXPECT_EQ(detail, "relayed by rank 1 on host " + host);
  r.rank = 0;
  r.peer = 2;
  r.seq = 7;
  r.waited_ms = r.timeout_ms = 1500;
  std::snprintf(r.op, sizeof r.op, "recv");
  std::snprintf(r.lane, sizeof r.lane, "%s", relayed_lane_name(1, "to1").c_str());
  std::snprintf(r.detail, sizeof r.detail, "%s", detail.c_str());
  EXPECT_EQ(to_string(r),
            "rank 0: recv seq 7 step 0: no data from rank 2 on lane tcp:via r1/to1 after 1500 ms "
            "(timeout 1500 ms) [relayed by rank 1 on host " +
                host + "]");
}

TEST(RelayPath, LineChainsEveryRelayBetweenTheEnds) {
  auto f = ring_fabric(5, false);
  EXPECT_EQ(relay_path(f, 0, 4), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(relay_path(f, 4, 0), (std::vector<int>{3, 2, 1}));
  EXPECT_EQ(relay_path(f, 1, 3), std::vector<int>{2});
  EXPECT_TRUE(relay_path(f, 3, 4).empty());
}
