// A data plane bound to its job (docs/reliability.md): two 2-rank jobs wire up at the same
// time over tcp on this host while strangers connect to their listening ports: a silent
// connection, a valid-looking hello without the token, and a hello carrying the other job's
// token (a rank of the other job on a reused port). Every stranger is dropped with a debug
// line, never taken as a peer, and wire-up is not held up by them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "net/hello.hpp"
#include "occurrences.hpp"
#include "transport/tcp/tcp_transport.hpp"

namespace hello = spark::net::hello;
using spark::transport::TcpOptions;
using spark::transport::TcpTransport;
using Clock = std::chrono::steady_clock;

namespace {

int port_of(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(';') + 1));
}

int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

void send_all(int fd, const void* p, std::size_t n) {
  EXPECT_EQ(::send(fd, p, n, MSG_NOSIGNAL), static_cast<ssize_t>(n));
}

struct Job {
  hello::Token token = hello::random_token();
  std::unique_ptr<TcpTransport> r0, r1;
  explicit Job() {
    TcpOptions o;
    o.lanes = 2;
    o.token = token;
    o.log_dropped = true;
    o.addr = "127.0.0.1";
    r0 = std::make_unique<TcpTransport>(0, 2, std::vector<int>{1}, o);
    r1 = std::make_unique<TcpTransport>(1, 2, std::vector<int>{0}, o);
  }
};

// Wires both jobs up at the same time (each job's two ranks in two threads); seconds taken.
double wire_both(Job& a, Job& b) {
  const auto t0 = Clock::now();
  auto wire = [](Job& j) {
    const std::vector<bool> same{true, true};
    std::thread t1([&] {
      j.r1->connect_all({j.r0->endpoint(), ""}, same, std::chrono::seconds(20));
    });
    j.r0->connect_all({"", j.r1->endpoint()}, same, std::chrono::seconds(20));
    t1.join();
  };
  std::thread ja([&] { wire(a); });
  std::thread jb([&] { wire(b); });
  ja.join();
  jb.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

TEST(JobToken, StrangersAndTheOtherJobAreDroppedWithoutStallingWireUp) {
  // The same wire-up without strangers first: the bound below is on what they add, so that a
  // slow machine (TSan, load 20) does not fail it.
  double alone = 0;
  {
    Job a, b;
    alone = wire_both(a, b);
  }
  Job a, b;
  // Strangers reach both jobs' rank 0 before their rank 1 connects.
  std::vector<int> strangers;
  for (Job* j : {&a, &b}) {
    const int port = port_of(j->r0->endpoint());
    strangers.push_back(connect_local(port));  // silent (a port scan, a probe)
    const int no_token = connect_local(port);  // valid-looking, all-zero token
    const auto h = hello::encode({hello::Kind::direct, 1, 0, 0}, hello::Token{});
    send_all(no_token, h.data(), h.size());
    strangers.push_back(no_token);
    const int other_job = connect_local(port);  // the other job's rank 1, same numbers
    const auto g = hello::encode({hello::Kind::direct, 1, 0, 0}, (j == &a ? b : a).token);
    send_all(other_job, g.data(), g.size());
    strangers.push_back(other_job);
  }
  testing::internal::CaptureStderr();
  const double took = wire_both(a, b);
  const std::string log = testing::internal::GetCapturedStderr();
  for (int fd : strangers) ::close(fd);
  // The silent strangers waited side by side with the ranks' connections and were closed when
  // wire-up ended: it did not wait for them (the old reader gave each stray up to 5 s, in turn;
  // waiting for one silent stranger's hello would add its 2 s).
  EXPECT_LT(took, alone + 1.5) << "alone " << alone << " s\n" << log;
  auto count = [&](const std::string& what) { return spark::test::occurrences(log, what); };
  EXPECT_EQ(count("tcp: dropped a connection from 127.0.0.1:"), 6u) << log;
  EXPECT_EQ(count("without this job's token"), 4u) << log;
  EXPECT_EQ(count("wire-up ended before its hello"), 2u) << log;
}

TEST(JobToken, HelloParsing) {
  const auto token = hello::random_token();
  std::string why;
  const auto bytes = hello::encode({hello::Kind::relay, 3, 1, 0}, token);
  const auto h = hello::parse(bytes, token, 4, &why);
  ASSERT_TRUE(h.has_value()) << why;
  EXPECT_EQ(h->kind, hello::Kind::relay);
  EXPECT_EQ(h->rank, 3);
  EXPECT_FALSE(hello::parse(bytes, hello::random_token(), 4, &why).has_value());
  EXPECT_NE(why.find("token"), std::string::npos);
  EXPECT_FALSE(hello::parse(bytes, token, 3, &why).has_value());  // rank 3 of a job of 3
  EXPECT_EQ(hello::from_hex(hello::to_hex(token)), token);
  EXPECT_FALSE(hello::from_hex("zz").has_value());
}
