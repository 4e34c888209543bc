// Control plane unit tests: framing, messages, HMAC handshake, and a real server on
// loopback facing good and bad clients.
#include <gtest/gtest.h>

#include <utility>  // before Asio (Boost 1.74 + g++ 12)

#include <boost/asio.hpp>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "control/client.hpp"
#include "control/messages.hpp"
#include "control/server.hpp"
#include "control/wire.hpp"

namespace spark::launch::control {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

TEST(ControlWire, FrameRoundTripByteByByte) {
  const std::string payload = Writer().u32(7).bytes("hello").u64(1ull << 40).take();
  const std::string frame = encode_frame(MsgType::kFenceUp, payload);
  ASSERT_EQ(frame.size(), kHeaderSize + payload.size());
  FrameDecoder d(kMaxPayload);
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    d.feed(frame.substr(i, 1));
    EXPECT_FALSE(d.next().has_value()) << "at byte " << i;
  }
  d.feed(frame.substr(frame.size() - 1));
  auto f = d.next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, MsgType::kFenceUp);
  Reader r(f->payload);
  EXPECT_EQ(r.u32(), 7u);
  EXPECT_EQ(r.bytes(), "hello");
  EXPECT_EQ(r.u64(), 1ull << 40);
  r.finish();
  EXPECT_EQ(d.pending(), 0u);
}

TEST(ControlWire, TwoFramesInOneChunk) {
  FrameDecoder d;
  d.feed(encode_frame(MsgType::kHeartbeat, "") + encode_frame(MsgType::kDone, encode(Done{3})));
  auto a = d.next();
  auto b = d.next();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->type, MsgType::kHeartbeat);
  EXPECT_EQ(decode_done(b->payload).code, 3);
  EXPECT_FALSE(d.next());
}

TEST(ControlWire, RejectsBadHeaders) {
  std::string f = encode_frame(MsgType::kDone, encode(Done{0}));
  auto expect_error = [](std::string bytes, const std::string& needle) {
    FrameDecoder d;
    d.feed(bytes);
    try {
      (void)d.next();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  std::string bad = f;
  bad[0] = 'X';
  expect_error(bad, "bad magic");
  bad = f;
  bad[4] = 9;
  expect_error(bad, "unsupported protocol version 9");
  bad = f;
  bad[5] = 99;
  expect_error(bad, "unknown message type 99");
  bad = f;
  bad[6] = 1;
  expect_error(bad, "reserved");
  // Oversized: rejected from the header alone, before any payload arrives.
  bad = f.substr(0, 8) + std::string("\x00\x10\x00\x00", 4);
  expect_error(bad, "exceeds the limit of 1024 bytes");
  // Magic checked as soon as 4 bytes are there.
  expect_error("GET ", "bad magic");
}

TEST(ControlWire, RandomBytesNeverCrash) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(static_cast<size_t>(rng() % 64 + 4), '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    FrameDecoder d;
    d.feed(junk);
    EXPECT_THROW((void)d.next(), ProtocolError);
  }
  // Random payloads for every decoder: either a clean decode or a ProtocolError.
  for (int i = 0; i < 2000; ++i) {
    std::string junk(static_cast<size_t>(rng() % 200), '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    for (auto fn : {+[](std::string_view s) { (void)decode_plan(s); },
                    +[](std::string_view s) { (void)decode_fence(s); },
                    +[](std::string_view s) { (void)decode_hello(s); },
                    +[](std::string_view s) { (void)decode_abort(s); },
                    +[](std::string_view s) { (void)decode_failed(s); }}) {
      try {
        fn(junk);
      } catch (const ProtocolError&) {
      }
    }
  }
}

TEST(ControlWire, TruncatedPayloadsThrow) {
  PlanMsg p;
  p.job_id = "job";
  p.plan.size = 2;
  p.plan.nodes = {{"a", true, 1, {0}}, {"b", false, 1, {1}}};
  p.plan.ranks = {{0, 0, 0}, {1, 1, 0}};
  p.argv = {"prog", "x"};
  p.node = 1;
  const std::string full = encode(p);
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_THROW((void)decode_plan(full.substr(0, n)), ProtocolError) << "length " << n;
  }
  EXPECT_THROW((void)decode_plan(full + "x"), ProtocolError);
  EXPECT_THROW((void)decode_fence(encode(Fence{1, "abc"}).substr(0, 10)), ProtocolError);
}

TEST(ControlMessages, PlanRoundTrip) {
  PlanMsg p;
  p.job_id = "sparkrun.1.2";
  p.node = 2;
  p.plan.size = 4;
  p.plan.nodes = {{"h0", false, 2, {0, 3}}, {"h1", false, 1, {1}}, {"h2", false, 1, {2}}};
  p.argv = {"./app", "--flag", ""};
  p.exports = {{"A", "1"}, {"B", ""}};
  p.tag_output = true;
  p.verbose = true;
  p.output_dir = "/tmp/out";
  p.kill_grace_ms = 1500;
  p.working_dir = "/work/job dir";
  p.nccl_env = true;
  const PlanMsg q = decode_plan(encode(p));
  EXPECT_EQ(q.job_id, p.job_id);
  EXPECT_EQ(q.node, 2u);
  EXPECT_EQ(q.plan.size, 4);
  ASSERT_EQ(q.plan.nodes.size(), 3u);
  EXPECT_EQ(q.plan.nodes[0].ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(q.plan.ranks[3].node, 0);
  EXPECT_EQ(q.plan.ranks[3].local_rank, 1);
  EXPECT_TRUE(q.plan.nodes[2].local);
  EXPECT_FALSE(q.plan.nodes[0].local);
  EXPECT_EQ(q.argv, p.argv);
  EXPECT_EQ(q.exports, p.exports);
  EXPECT_TRUE(q.tag_output);
  EXPECT_FALSE(q.timestamp_output);
  EXPECT_TRUE(q.verbose);
  EXPECT_EQ(q.output_dir, "/tmp/out");
  EXPECT_EQ(q.kill_grace_ms, 1500u);
  EXPECT_EQ(q.working_dir, "/work/job dir");
  EXPECT_TRUE(q.nccl_env);
  EXPECT_FALSE(q.report_bindings);
}

TEST(ControlMessages, PlanRejectsInconsistentPlacement) {
  PlanMsg p;
  p.job_id = "j";
  p.plan.size = 2;
  p.plan.nodes = {{"a", false, 1, {0}}, {"b", false, 1, {0}}};  // rank 0 twice, rank 1 nowhere
  p.argv = {"x"};
  EXPECT_THROW((void)decode_plan(encode(p)), ProtocolError);
  p.plan.nodes = {{"a", false, 1, {0, 1}}};
  p.node = 1;  // no such node
  EXPECT_THROW((void)decode_plan(encode(p)), ProtocolError);
}

TEST(ControlMessages, SmallRoundTrips) {
  EXPECT_EQ(decode_fence(encode(Fence{42, std::string("a\0b", 3)})).data, std::string("a\0b", 3));
  EXPECT_EQ(decode_failed(encode(Failed{124, "x"})).line, "x");
  EXPECT_THROW((void)decode_failed(encode(Failed{0, "x"})), ProtocolError);
  EXPECT_TRUE(decode_abort(encode(Abort{true, "r"})).now);
  EXPECT_THROW((void)decode_done(encode(Done{300})), ProtocolError);
}

// The small messages' bytes, written out by hand from the protocol (integers big-endian,
// strings as a u32 length and the bytes, nonces and MACs as their 32 bytes): the layouts are
// one definition for both directions (messages.cpp), and these pin what goes on the wire.
TEST(ControlMessages, SmallMessagesKeepTheirBytes) {
  Nonce nonce;
  nonce.fill(0xaa);
  Mac mac;
  mac.fill(0xbb);
  const std::string n(32, '\xaa'), k(32, '\xbb');
  using namespace std::string_literals;
  EXPECT_EQ(encode(Challenge{nonce}), n);
  EXPECT_EQ(encode(Hello{0x01020304, nonce, mac}), "\x01\x02\x03\x04"s + n + k);
  EXPECT_EQ(encode(Welcome{mac}), k);
  EXPECT_EQ(encode(Fence{0x0102030405060708, "ab"}),
            "\x01\x02\x03\x04\x05\x06\x07\x08\0\0\0\x02"
            "ab"s);
  EXPECT_EQ(encode(Failed{7, "x"}), "\0\0\0\x07\0\0\0\x01x\0"s);
  EXPECT_EQ(encode(Failed{7, "x", true}), "\0\0\0\x07\0\0\0\x01x\x01"s);
  EXPECT_EQ(encode(Done{3}), "\0\0\0\x03"s);
  EXPECT_EQ(encode(Abort{true, "r"}), "\x01\0\0\0\x01r"s);
  EXPECT_EQ(encode(Abort{false, ""}), "\0\0\0\0\0"s);
  EXPECT_EQ(encode(StatusAsk{2, "status"}), "\0\0\0\0\0\0\0\x02\0\0\0\x06status"s);
  EXPECT_EQ(encode(StatusReply{2, "{}"}), "\0\0\0\0\0\0\0\x02\0\0\0\x02{}"s);
  EXPECT_EQ(decode_status_ask("\0\0\0\0\0\0\0\x05\0\0\0\x01s"s).id, 5u);
  EXPECT_EQ(decode_status_reply("\0\0\0\0\0\0\0\x05\0\0\0\x02{}"s).json, "{}");
  EXPECT_EQ(decode_report_file(encode(ReportFile{"flight.a.json", "{}"})).content, "{}");
  EXPECT_THROW((void)decode_report_file(encode(ReportFile{"../x", "{}"})), ProtocolError);
  EXPECT_THROW((void)decode_report_file(encode(ReportFile{"..", ""})), ProtocolError);
  EXPECT_THROW((void)decode_status_ask("\0\0\0\0\0\0\0\x05\0\0\0\x02s"s), ProtocolError);

  const Hello h = decode_hello("\x01\x02\x03\x04"s + n + k);
  EXPECT_EQ(h.node, 0x01020304u);
  EXPECT_EQ(h.nonce, nonce);
  EXPECT_EQ(h.mac, mac);
  EXPECT_EQ(decode_challenge(n).nonce, nonce);
  EXPECT_EQ(decode_welcome(k).mac, mac);
  EXPECT_EQ(decode_fence("\0\0\0\0\0\0\0\x09\0\0\0\x01z"s).seq, 9u);
  EXPECT_EQ(decode_done("\0\0\0\xff"s).code, 255);
  // Each decoder takes exactly its layout: a byte short or a byte more is refused.
  EXPECT_THROW((void)decode_challenge(n.substr(1)), ProtocolError);
  EXPECT_THROW((void)decode_welcome(k + "x"), ProtocolError);
  EXPECT_THROW((void)decode_hello("\x01\x02\x03\x04"s + n + k + "x"), ProtocolError);
  EXPECT_THROW((void)decode_done("\0\0\0\x03\0"s), ProtocolError);
  EXPECT_THROW((void)decode_abort("\x02\0\0\0\0"s), ProtocolError);  // flag 0 or 1 only
  EXPECT_THROW((void)decode_failed("\0\0\0\x07\0\0\0\x02x\0"s), ProtocolError);
  EXPECT_TRUE(decode_failed("\0\0\0\x07\0\0\0\x01x\x01"s).timed_out);
}

TEST(ControlAuth, MacsDependOnEverything) {
  const Secret s = random_secret();
  Secret other = s;
  other[0] ^= 1;
  const Nonce a = random_nonce(), b = random_nonce();
  const Mac m = make_mac(s, Role::kDaemon, "job", 1, a, b);
  EXPECT_TRUE(mac_equal(m, make_mac(s, Role::kDaemon, "job", 1, a, b)));
  EXPECT_FALSE(mac_equal(m, make_mac(other, Role::kDaemon, "job", 1, a, b)));
  EXPECT_FALSE(mac_equal(m, make_mac(s, Role::kLauncher, "job", 1, a, b)));
  EXPECT_FALSE(mac_equal(m, make_mac(s, Role::kDaemon, "job2", 1, a, b)));
  EXPECT_FALSE(mac_equal(m, make_mac(s, Role::kDaemon, "job", 2, a, b)));
  EXPECT_FALSE(mac_equal(m, make_mac(s, Role::kDaemon, "job", 1, b, a)));
  EXPECT_NE(random_secret(), random_secret());
}

TEST(ControlAuth, HexIsStrict) {
  const Secret s = random_secret();
  EXPECT_EQ(secret_from_hex(to_hex(s)), s);
  EXPECT_THROW((void)secret_from_hex(""), std::invalid_argument);
  EXPECT_THROW((void)secret_from_hex(to_hex(s) + "0"), std::invalid_argument);
  std::string bad = to_hex(s);
  bad[10] = 'g';
  EXPECT_THROW((void)secret_from_hex(bad), std::invalid_argument);
}

// A real server on loopback, run on its own thread; events are collected for the test.
class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    secret_ = random_secret();
    ControlServer::Callbacks cb;
    cb.authenticated = [this](std::uint32_t n) { record("auth " + std::to_string(n)); };
    cb.message = [this](std::uint32_t n, const Frame& f) {
      if (f.type == MsgType::kFenceUp) {
        Fence fe = decode_fence(f.payload);
        record("fence " + std::to_string(n) + " " + fe.data);
        server_->send(n, MsgType::kFenceDown, encode(Fence{fe.seq, "all:" + fe.data}));
        return;
      }
      throw ProtocolError("unexpected " + type_name(static_cast<std::uint8_t>(f.type)));
    };
    cb.lost = [this](std::uint32_t n, const std::string& why) {
      record("lost " + std::to_string(n) + " " + why);
    };
    cb.log = [this](const std::string& line) { record("log " + line); };
    ControlServer::Settings st;
    st.handshake_timeout = 500ms;
    st.heartbeat = 100ms;
    st.link_timeout = 800ms;
    server_ = std::make_unique<ControlServer>(
        io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0), secret_, "job-1", 3,
        cb, st);
    port_ = server_->local_endpoint().port();
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [this] { server_->stop(); });
    io_.stop();
    thread_.join();
    server_.reset();
  }
  void record(const std::string& e) {
    std::lock_guard<std::mutex> lock(m_);
    events_.push_back(e);
    cv_.notify_all();
  }
  // Waits (generously) for an event containing `needle`.
  bool wait_for(const std::string& needle, std::chrono::milliseconds t = 10s) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, t, [&] {
      for (const auto& e : events_) {
        if (e.find(needle) != std::string::npos) return true;
      }
      return false;
    });
  }
  std::string dump() {
    std::lock_guard<std::mutex> lock(m_);
    std::string s;
    for (const auto& e : events_) s += e + "\n";
    return s;
  }
  // Raw TCP client: sends bytes, returns true when the server closed the connection.
  bool raw_client_closed(const std::string& bytes) {
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), port_});
    asio::write(s, asio::buffer(bytes));
    char buf[4096];
    boost::system::error_code ec;
    for (int i = 0; i < 100 && !ec; ++i) s.read_some(asio::buffer(buf), ec);  // challenge, then EOF
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  asio::io_context io_;
  Secret secret_{};
  std::unique_ptr<ControlServer> server_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

TEST_F(ServerFixture, GoodClientFencesWhileBadClientsAreRejected) {
  ControlClient good("127.0.0.1", port_, 5s);
  good.handshake(secret_, "job-1", 1, 5s);
  ASSERT_TRUE(wait_for("auth 1")) << dump();

  // Wrong secret: the server refuses, the client learns nothing.
  Secret wrong = secret_;
  wrong[5] ^= 0x40;
  ControlClient bad("127.0.0.1", port_, 5s);
  EXPECT_THROW(bad.handshake(wrong, "job-1", 2, 5s), LinkError);
  EXPECT_TRUE(wait_for("wrong job secret")) << dump();
  // Right secret, wrong job: refused too.
  ControlClient bad_job("127.0.0.1", port_, 5s);
  EXPECT_THROW(bad_job.handshake(secret_, "job-2", 2, 5s), LinkError);
  // The same node twice: refused.
  ControlClient twin("127.0.0.1", port_, 5s);
  EXPECT_THROW(twin.handshake(secret_, "job-1", 1, 5s), LinkError);
  EXPECT_TRUE(wait_for("already connected")) << dump();
  // Random bytes, an oversized frame, a message before authentication: closed.
  EXPECT_TRUE(raw_client_closed("\x13\x37 random bytes that are not a frame"));
  EXPECT_TRUE(raw_client_closed(std::string("SPKR") + static_cast<char>(kVersion) +
                                std::string("\x05\x00\x00\x7f\xff\xff\xff", 7)));
  EXPECT_TRUE(raw_client_closed(encode_frame(MsgType::kFenceUp, encode(Fence{0, "x"}))));
  EXPECT_TRUE(wait_for("before authentication")) << dump();
  EXPECT_TRUE(wait_for("exceeds the limit")) << dump();
  // A silent connection is dropped after the handshake timeout.
  EXPECT_TRUE(raw_client_closed(""));
  EXPECT_TRUE(wait_for("no authentication within")) << dump();

  // The good connection is unharmed: a fence round trip still works.
  good.send(MsgType::kFenceUp, encode(Fence{7, "n1"}));
  std::optional<Frame> f;
  for (int i = 0; i < 100 && !(f && f->type == MsgType::kFenceDown); ++i) f = good.receive(100ms);
  ASSERT_TRUE(f && f->type == MsgType::kFenceDown);
  EXPECT_EQ(decode_fence(f->payload).data, "all:n1");
  EXPECT_EQ(decode_fence(f->payload).seq, 7u);
  EXPECT_EQ(dump().find("lost 1"), std::string::npos) << dump();
}

TEST_F(ServerFixture, ClientChecksTheLauncher) {
  // A "launcher" that does not know the secret cannot give orders: emulate one by
  // answering the hello with a welcome made from another secret.
  asio::io_context io;
  asio::ip::tcp::acceptor acc(io, {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = acc.local_endpoint().port();
  std::thread fake([&] {
    auto s = acc.accept();
    asio::write(s,
                asio::buffer(encode_frame(MsgType::kChallenge, encode(Challenge{random_nonce()}))));
    char buf[256];
    boost::system::error_code ec;
    s.read_some(asio::buffer(buf), ec);
    asio::write(s, asio::buffer(encode_frame(MsgType::kWelcome, encode(Welcome{Mac{}}))), ec);
    s.read_some(asio::buffer(buf), ec);
  });
  ControlClient c("127.0.0.1", port, 5s);
  try {
    c.handshake(secret_, "job-1", 0, 5s);
    ADD_FAILURE() << "accepted a launcher without the secret";
  } catch (const LinkError& e) {
    EXPECT_NE(std::string(e.what()).find("failed authentication"), std::string::npos) << e.what();
  }
  c.shutdown();
  fake.join();
}

TEST_F(ServerFixture, SilentDaemonCountsAsLost) {
  ControlClient c("127.0.0.1", port_, 5s);
  c.handshake(secret_, "job-1", 0, 5s);
  // No heartbeats from us: the server gives up after link_timeout (800 ms).
  EXPECT_TRUE(wait_for("lost 0 no message for 800 ms", 20s)) << dump();
}

TEST_F(ServerFixture, ClosedDaemonCountsAsLost) {
  {
    ControlClient c("127.0.0.1", port_, 5s);
    c.handshake(secret_, "job-1", 2, 5s);
    ASSERT_TRUE(wait_for("auth 2"));
  }
  EXPECT_TRUE(wait_for("lost 2 connection closed by the peer")) << dump();
}

TEST(ControlClient, UnreachableLauncherIsAClearError) {
  // A port nobody listens on (bound, not listening).
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.open(asio::ip::tcp::v4());
  s.bind({asio::ip::make_address("127.0.0.1"), 0});
  const auto port = s.local_endpoint().port();
  try {
    ControlClient c("127.0.0.1", port, 2s);
    ADD_FAILURE() << "connected to nothing";
  } catch (const LinkError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot connect to the launcher"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ControlClient("not-an-ip", 1, 1s), LinkError);
}

}  // namespace
}  // namespace spark::launch::control
