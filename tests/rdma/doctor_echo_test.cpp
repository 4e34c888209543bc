// `sparkrun doctor`'s tcp echo bound to its job (docs/doctor.md, docs/reliability.md): the
// responder's lane listener gets strangers before the test's initiator (a silent connection, a
// valid-looking hello without the token, another job's hello, this job's hello for another
// test); each is dropped with a debug line and the initiator still passes within its window.
// An initiator that reaches a listener that is not the job's (an echo server) fails its row.
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "log/log.hpp"
#include "net/hello.hpp"
#include "net/socket.hpp"
#include "round_trips.hpp"

namespace hello = spark::net::hello;
using spark::doctor::tcp_initiate;
using spark::doctor::tcp_respond;
using spark::doctor::TripHello;
using Clock = std::chrono::steady_clock;

namespace {

const spark::fabric::Lane kLoopback{"lo", 0, 0x7f000001u, 8};

int connect_loopback(int port) {
  return spark::net::connect_within(0, 0x7f000001u, port, std::chrono::seconds(2)).release();
}

void send_hello(int fd, const hello::Hello& h, const hello::Token& t) {
  const auto bytes = hello::encode(h, t);
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::size_t count(const std::string& log, const std::string& what) {
  std::size_t n = 0;
  for (auto p = log.find(what); p != std::string::npos; p = log.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(DoctorEcho, StrangersAreDroppedAndTheInitiatorStillPasses) {
  spark::log::configure(spark::log::Level::info, {"doctor"});
  const TripHello test{hello::random_token(), 3, 0, 1, 4};
  spark::net::Listener listener(0x7f000001u, "lane lo", SOCK_NONBLOCK);
  const int port = listener.port();
  testing::internal::CaptureStderr();
  std::vector<int> strangers;
  strangers.push_back(connect_loopback(port));  // silent
  strangers.push_back(connect_loopback(port));
  send_hello(strangers.back(), {hello::Kind::probe, 0, 4, 1}, hello::Token{});
  strangers.push_back(connect_loopback(port));
  send_hello(strangers.back(), {hello::Kind::probe, 0, 4, 1}, hello::random_token());
  strangers.push_back(connect_loopback(port));  // an earlier test (link 3) that ran late
  send_hello(strangers.back(), {hello::Kind::probe, 2, 3, 1}, test.token);
  const auto t0 = Clock::now();
  std::string responded = "not run";
  std::thread responder(
      [&] { responded = tcp_respond(listener, 8, test, std::chrono::seconds(5)); });
  const auto trip =
      tcp_initiate(kLoopback, 0x7f000001u, port, 8, test, std::chrono::seconds(5), "rank 1");
  responder.join();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string log = testing::internal::GetCapturedStderr();
  for (int fd : strangers) ::close(fd);
  spark::log::configure(spark::log::Level::warn, {});
  EXPECT_EQ(trip.error, "") << log;
  EXPECT_EQ(trip.done, 8);
  EXPECT_EQ(responded, "") << log;
  EXPECT_LT(took, 1.5) << "a stranger held up the echo\n" << log;
  EXPECT_EQ(count(log, "doctor: dropped a connection from 127.0.0.1:"), 4u) << log;
  EXPECT_EQ(count(log, "without this job's token"), 2u) << log;
  EXPECT_EQ(count(log, "for another test (rank 2 -> 1, link 3)"), 1u) << log;
}

TEST(DoctorEcho, AListenerThatIsNotTheJobsFailsTheRow) {
  const TripHello test{hello::random_token(), 2, 0, 1, 0};
  spark::net::Listener echo(0x7f000001u, "echo");
  std::thread echoer([&] {  // echoes whatever comes, as a stranger's echo service would
    spark::net::Fd c(::accept(echo.fd(), nullptr, nullptr));
    char buf[64];
    for (ssize_t n; (n = ::recv(c.get(), buf, sizeof buf, 0)) > 0;)
      (void)!::send(c.get(), buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
  });
  const auto trip =
      tcp_initiate(kLoopback, 0x7f000001u, echo.port(), 4, test, std::chrono::seconds(3), "rank 1");
  echoer.join();
  EXPECT_NE(trip.error.find("the answer is not from 1 to 0 (an echo"), std::string::npos)
      << trip.error;
  EXPECT_EQ(trip.done, 0);
}

// No fence between tests: rank 1, idle while rank 2 answers rank 0, starts its own test with
// rank 2 at once, on the same lane listener. Rank 2 drops that early hello (not the test it is
// in) and rank 1 asks again until rank 2 gets to its test, within rank 1's window (it failed
// at once, "no answer to the job's hello ... after 0 ms", in 4 of 6 `sparkrun doctor -n 3`).
TEST(DoctorEcho, AnInitiatorThatComesEarlyAsksAgain) {
  const auto token = hello::random_token();
  const TripHello first{token, 3, 0, 2, 0}, second{token, 3, 1, 2, 0};
  spark::net::Listener listener(0x7f000001u, "lane lo", SOCK_NONBLOCK);
  const int port = listener.port();
  std::string responded_first = "not run", responded_second = "not run";
  std::thread responder([&] {
    responded_first = tcp_respond(listener, 4, first, std::chrono::seconds(5));
    responded_second = tcp_respond(listener, 4, second, std::chrono::seconds(5));
  });
  spark::doctor::TripResult early;
  std::thread rank1([&] {
    early =
        tcp_initiate(kLoopback, 0x7f000001u, port, 4, second, std::chrono::seconds(5), "rank 2");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 1's hello is first
  const auto trip =
      tcp_initiate(kLoopback, 0x7f000001u, port, 4, first, std::chrono::seconds(5), "rank 2");
  rank1.join();
  responder.join();
  EXPECT_EQ(trip.error, "");
  EXPECT_EQ(responded_first, "");
  EXPECT_EQ(early.error, "");
  EXPECT_EQ(early.done, 4);
  EXPECT_EQ(responded_second, "");
}
