// A peer that finished closes every tcp connection, and the close on one can arrive before
// the last message on another (a relay forwards each connection on its own): the wait for that
// message must not fail on the other connection's close (TcpTransport::wait_state), and must
// still fail on a close of the connection it waits on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/hello.hpp"
#include "transport/tcp/tcp_transport.hpp"

using spark::transport::MsgHeader;
using spark::transport::PeerState;
using spark::transport::RecvView;
using spark::transport::TcpOptions;
using spark::transport::TcpTransport;
using spark::transport::WaitKind;
using Clock = std::chrono::steady_clock;

namespace {

struct Pair {
  std::unique_ptr<TcpTransport> r0, r1;
  Pair() {
    TcpOptions o;
    o.lanes = 2;
    o.token = spark::net::hello::random_token();
    o.addr = "127.0.0.1";
    r0 = std::make_unique<TcpTransport>(0, 2, std::vector<int>{1}, o);
    r1 = std::make_unique<TcpTransport>(1, 2, std::vector<int>{0}, o);
    const std::vector<bool> same{true, true};
    std::thread t1([&] { r1->connect_all({r0->endpoint(), ""}, same, std::chrono::seconds(20)); });
    r0->connect_all({"", r1->endpoint()}, same, std::chrono::seconds(20));
    t1.join();
  }
};

// `word` in front of a whole piece (slot_bytes: the next message goes on the next
// connection) or alone (the next message stays on this connection).
void send_word(TcpTransport& t, int peer, std::uint32_t word, bool whole_piece = true) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!t.can_send(peer) && Clock::now() < deadline) t.progress();
  ASSERT_TRUE(t.can_send(peer));
  std::vector<std::byte> piece(whole_piece ? t.slot_bytes() : sizeof word);
  std::memcpy(piece.data(), &word, sizeof word);
  MsgHeader h;
  h.bytes = static_cast<std::uint32_t>(piece.size());
  t.send(peer, h, piece.data());
}

// The next message from `peer`, within 5 s; 0 when none came.
std::uint32_t take_word(TcpTransport& t, int peer) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  RecvView v;
  while ((v = t.peek(peer)).data == nullptr && Clock::now() < deadline) t.progress();
  if (v.data == nullptr) return 0;
  std::uint32_t word = 0;
  std::memcpy(&word, v.data, sizeof word);
  t.release(peer);
  return word;
}

// Progress until `t` has seen the close of some connection to `peer`, within 5 s.
bool see_close(TcpTransport& t, int peer) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (t.peer_state(peer, nullptr) == PeerState::ok && Clock::now() < deadline) {
    t.progress();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return t.peer_state(peer, nullptr) != PeerState::ok;
}

}  // namespace

// Small messages keep to one connection, whole pieces alternate (TcpTransport::next_lane):
// the receiver finds every message on the connection it expects.
TEST(TcpLanes, SmallMessagesKeepToOneConnectionWholePiecesAlternate) {
  Pair pair;
  const std::pair<std::uint32_t, bool> sent[] = {{1, false}, {2, false}, {3, true}, {4, false},
                                                 {5, true},  {6, true},  {7, false}};
  const char* const expected_lane[] = {"tcp:0", "tcp:0", "tcp:0", "tcp:1",
                                       "tcp:1", "tcp:0", "tcp:1"};
  for (std::size_t i = 0; i < std::size(sent); ++i) {
    EXPECT_EQ(pair.r0->lane_name(1, WaitKind::credit), expected_lane[i]) << "message " << i;
    EXPECT_EQ(pair.r1->lane_name(0, WaitKind::data), expected_lane[i]) << "message " << i;
    send_word(*pair.r0, 1, sent[i].first, sent[i].second);
    EXPECT_EQ(take_word(*pair.r1, 0), sent[i].first);
  }
}

TEST(TcpClose, AWaitFailsOnlyOnTheConnectionItWaitsOn) {
  Pair pair;
  send_word(*pair.r0, 1, 11);  // connection 0, a whole piece: the next goes on connection 1
  ASSERT_EQ(take_word(*pair.r1, 0), 11u);
  // Connection 0 closes while the next message (connection 1) is still to come.
  pair.r0->close_connection(1, 0);
  ASSERT_TRUE(see_close(*pair.r1, 0)) << "the close of connection 0 never arrived";
  std::string detail;
  EXPECT_EQ(pair.r1->wait_state(0, WaitKind::data, &detail), PeerState::ok)
      << "the data wait failed on the other connection's close: " << detail;
  // A send from rank 1 would go on connection 0 (its first): that wait cannot be served.
  EXPECT_EQ(pair.r1->wait_state(0, WaitKind::credit, &detail), PeerState::closed);
  EXPECT_NE(detail.find("connection 0"), std::string::npos) << detail;
  send_word(*pair.r0, 1, 22);  // connection 1
  EXPECT_EQ(take_word(*pair.r1, 0), 22u) << "the message after the other connection's close";
  // The next message would come on connection 0, which is closed: now the data wait fails.
  EXPECT_EQ(pair.r1->wait_state(0, WaitKind::data, &detail), PeerState::closed);
  EXPECT_NE(detail.find("closed by the peer"), std::string::npos) << detail;
}
