// Fabric map: subnet matching, lane publication, map building on the switchless shapes
// (pair, triangle, 4-ring), relays, and the pinned-file comparison.
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "../libspark/occurrences.hpp"
#include "fabric/fabric_file.hpp"
#include "fabric/fabric_map.hpp"
#include "fabric/local_lanes.hpp"
#include "fabric/probe_protocol.hpp"
#include "log/log.hpp"
#include "net/hello.hpp"
#include "net/socket.hpp"
#include "spark/error.hpp"

using namespace spark::fabric;

namespace {

Lane lane(const std::string& name, int port, const std::string& cidr) {
  auto [ip, prefix] = parse_cidr(cidr, "test");
  return Lane{name, port, ip, prefix};
}

bool all_ok(int, int, int, int) {
  return true;
}

// Triangle: three /30 point-to-point links, port 0 to one peer, port 1 to the other.
std::vector<std::vector<Lane>> triangle() {
  return {{lane("p0", 0, "10.1.1.1/30"), lane("p1", 1, "10.1.3.2/30")},
          {lane("p0", 0, "10.1.2.1/30"), lane("p1", 1, "10.1.1.2/30")},
          {lane("p0", 0, "10.1.3.1/30"), lane("p1", 1, "10.1.2.2/30")}};
}

// 4-ring: 0-1, 1-2, 2-3, 3-0; 0 and 2 (1 and 3) are opposite.
std::vector<std::vector<Lane>> ring4() {
  return {{lane("p0", 0, "10.2.1.1/30"), lane("p1", 1, "10.2.4.2/30")},
          {lane("p0", 0, "10.2.2.1/30"), lane("p1", 1, "10.2.1.2/30")},
          {lane("p0", 0, "10.2.3.1/30"), lane("p1", 1, "10.2.2.2/30")},
          {lane("p0", 0, "10.2.4.1/30"), lane("p1", 1, "10.2.3.2/30")}};
}

}  // namespace

TEST(FabricParse, Ipv4AndCidrAreStrict) {
  EXPECT_EQ(parse_ipv4("10.1.2.3", "x"), 0x0a010203u);
  EXPECT_EQ(format_ipv4(0x0a010203u), "10.1.2.3");
  for (auto bad : {"", "abc", "1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.4x", "1..2.3", "-1.2.3.4"})
    EXPECT_THROW(parse_ipv4(bad, "x"), spark::ConfigError) << bad;
  EXPECT_EQ(parse_cidr("10.0.0.0/8", "x"), std::make_pair(0x0a000000u, 8));
  for (auto bad : {"10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/x", "/8"})
    EXPECT_THROW(parse_cidr(bad, "x"), spark::ConfigError) << bad;
  EXPECT_THROW(parse_nets("10.0.0.0/8,", "SPARK_DATA_NET"), spark::ConfigError);
  EXPECT_EQ(parse_nets("10.1.0.0/16,10.2.0.0/16", "SPARK_DATA_NET").size(), 2u);
  EXPECT_TRUE(parse_nets("", "SPARK_DATA_NET").empty());
}

TEST(FabricParse, SameSubnet) {
  EXPECT_TRUE(same_subnet(lane("a", 0, "10.1.1.1/30"), lane("b", 0, "10.1.1.2/30")));
  EXPECT_FALSE(same_subnet(lane("a", 0, "10.1.1.1/30"), lane("b", 0, "10.1.1.5/30")));
  EXPECT_FALSE(same_subnet(lane("a", 0, "10.1.1.1/30"), lane("b", 0, "10.1.1.1/30")))
      << "one address on both ends is not a link";
  EXPECT_FALSE(same_subnet(lane("a", 0, "10.1.1.1/30"), lane("b", 0, "10.1.1.2/24")))
      << "prefixes differ";
  EXPECT_TRUE(same_subnet(lane("a", 0, "10.9.0.1/16"), lane("b", 0, "10.9.200.7/16")));
  EXPECT_TRUE(in_nets(lane("a", 0, "10.1.1.1/30"), {}));
  EXPECT_TRUE(in_nets(lane("a", 0, "10.1.1.1/30"), parse_nets("10.1.0.0/16", "x")));
  EXPECT_FALSE(in_nets(lane("a", 0, "10.250.0.1/24"), parse_nets("10.1.0.0/16", "x")));
}

TEST(FabricParse, LanesRoundTripAndStrictDecode) {
  auto lanes = triangle()[0];
  EXPECT_EQ(encode_lanes(lanes), "p0,0,10.1.1.1/30;p1,1,10.1.3.2/30");
  EXPECT_EQ(decode_lanes(encode_lanes(lanes)), lanes);
  EXPECT_TRUE(decode_lanes("").empty());
  for (auto bad : {"p0,0", "p0,0,10.1.1.1", ",0,10.1.1.1/30", "p0,x,10.1.1.1/30",
                   "p0,0,10.1.1.1/30;", "p0,0,10.1.1.1/30,extra"})
    EXPECT_THROW(decode_lanes(bad), spark::ConfigError) << bad;
}

TEST(FabricMapTest, PairWithBothHalvesOfOneCable) {
  // Two Sparks, one cable: both PCIe halves of port 0 share the cable's subnet.
  std::vector<std::vector<Lane>> l{
      {lane("rocep1s0f0", 0, "10.3.0.1/24"), lane("roceP2p1s0f0", 0, "10.3.0.3/24"),
       lane("rocep1s0f1", 1, "10.4.0.1/24")},
      {lane("rocep1s0f0", 0, "10.3.0.2/24"), lane("roceP2p1s0f0", 0, "10.3.0.4/24")}};
  auto m = build_map(l, all_ok);
  ASSERT_EQ(m.route(0, 1).kind, Route::Kind::direct);
  EXPECT_EQ(m.route(0, 1).lanes.size(), 4u) << "same subnet: every pairing of the halves";
  EXPECT_EQ(m.route(1, 0).lanes.front(), (LanePair{0, 0}));
  EXPECT_TRUE(m.fully_connected());
}

TEST(FabricMapTest, TriangleGivesEachPeerItsOwnLane) {
  auto l = triangle();
  int probes = 0;
  auto m = build_map(l, [&](int, int, int, int) { return ++probes, true; });
  EXPECT_EQ(probes, 3) << "only same-subnet pairs are probed";
  EXPECT_TRUE(m.fully_connected());
  // node 0: lane p0 -> node 1's p1; lane p1 -> node 2's p0.
  EXPECT_EQ(m.route(0, 1).lanes, (std::vector<LanePair>{{0, 1}}));
  EXPECT_EQ(m.route(0, 2).lanes, (std::vector<LanePair>{{1, 0}}));
  EXPECT_EQ(m.route(1, 2).lanes, (std::vector<LanePair>{{0, 1}}));
  EXPECT_EQ(m.route(2, 1).lanes, (std::vector<LanePair>{{1, 0}}));
  EXPECT_EQ(m.route(2, 0).lanes, (std::vector<LanePair>{{0, 1}}));
  EXPECT_EQ(m.neighbours(1), (std::vector<int>{0, 2}));
  auto text = m.describe({"a", "b", "c"}, l);
  EXPECT_NE(text.find("a -> c: direct p1(10.1.3.2)->p0(10.1.3.1)"), std::string::npos) << text;
}

TEST(FabricMapTest, FailedProbeDropsTheLane) {
  auto l = triangle();
  // The 0-2 cable is on the right subnet but dead: 0 reaches 2 through 1.
  auto m = build_map(l, [](int a, int, int b, int) { return !(a == 0 && b == 2); });
  EXPECT_FALSE(m.fully_connected());
  EXPECT_EQ(m.route(0, 2).kind, Route::Kind::relay);
  EXPECT_EQ(m.route(0, 2).via, 1);
  EXPECT_EQ(m.route(2, 0).via, 1);
  EXPECT_EQ(m.route(0, 1).kind, Route::Kind::direct);
}

TEST(FabricMapTest, RingRelaysTheOppositeNodeThroughTheLowerNeighbour) {
  auto l = ring4();
  auto m = build_map(l, all_ok);
  EXPECT_FALSE(m.fully_connected());
  for (int a = 0; a < 4; ++a) {
    EXPECT_EQ(m.route(a, (a + 1) % 4).kind, Route::Kind::direct) << a;
    EXPECT_EQ(m.route(a, (a + 3) % 4).kind, Route::Kind::direct) << a;
    const auto& opp = m.route(a, (a + 2) % 4);
    EXPECT_EQ(opp.kind, Route::Kind::relay) << a;
    EXPECT_EQ(opp.hops, 2);
    EXPECT_EQ(opp.via, std::min((a + 1) % 4, (a + 3) % 4)) << "deterministic tie-break";
  }
  EXPECT_EQ(m.neighbours(0), (std::vector<int>{1, 3}));
  EXPECT_NE(m.describe({}, l).find("0 -> 2: relay via 1 (2 hops)"), std::string::npos);
}

TEST(FabricMapTest, IsolatedNodeIsUnreachable) {
  auto l = triangle();
  l.push_back({lane("p0", 0, "10.9.9.1/30")});
  auto m = build_map(l, all_ok);
  EXPECT_EQ(m.route(0, 3).kind, Route::Kind::unreachable);
  EXPECT_NE(m.describe({}, l).find("0 -> 3: UNREACHABLE"), std::string::npos);
  EXPECT_THROW(m.route(0, 4), spark::InvalidUsage);
}

TEST(FabricFileTest, RoundTripMatchesAndMiscablingIsRefusedShowingBoth) {
  std::vector<std::string> hosts{"n0", "n1", "n2"};
  auto l = triangle();
  auto found = from_map(hosts, l, build_map(l, all_ok));
  EXPECT_EQ(found.cables.size(), 3u);
  EXPECT_TRUE(found.cables.count({"n0:p0", "n1:p1"}));
  auto pinned = parse_fabric_json(to_json(found), "t.json");
  EXPECT_EQ(pinned.hosts, hosts);
  EXPECT_EQ(pinned.lanes, l);
  EXPECT_EQ(compare(pinned, found), "");
  // The same three hosts cabled as a line (0-2 dead): refused, both maps shown.
  auto line =
      from_map(hosts, l, build_map(l, [](int a, int, int b, int) { return !(a == 0 && b == 2); }));
  auto msg = compare(pinned, line);
  EXPECT_NE(msg.find("missing cable n0:p1 <-> n2:p0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pinned:"), std::string::npos);
  EXPECT_NE(msg.find("found:"), std::string::npos);
}

TEST(FabricFileTest, StrictParse) {
  for (auto bad :
       {"", "[]", "{\"hosts\":[]}", "{\"hosts\":[{\"name\":\"\"}],\"cables\":[]}",
        "{\"hosts\":[{\"name\":\"a\"},{\"name\":\"a\"}],\"cables\":[]}",
        "{\"hosts\":[{\"name\":\"a\"}],\"cables\":[[\"a:x\",\"b:y\"]]}",
        "{\"hosts\":[{\"name\":\"a\"}],\"cables\":[[\"a\",\"a:y\"]]}",
        "{\"hosts\":[{\"name\":\"a\",\"ports\":[{\"name\":\"x\",\"ipv4\":\"10.0.0.1\"}]}],"
        "\"cables\":[]}"})
    EXPECT_THROW(parse_fabric_json(bad, "f.json"), spark::ConfigError) << bad;
  EXPECT_THROW(load_fabric_file("/nonexistent/fabric.json"), spark::ConfigError);
}

TEST(FabricLocal, LanesOfThisNodeAndAProbe) {
  // The test machine has at least loopback (excluded); lanes are sorted and filterable.
  auto all = local_lanes({});
  for (const auto& l : all) EXPECT_NE(l.ipv4 >> 24, 127u) << l.name;
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(),
                             [](const Lane& a, const Lane& b) { return a.name < b.name; }));
  // Selecting one lane's own /32 keeps exactly that lane.
  if (!all.empty()) {
    auto one = local_lanes(parse_nets(format_ipv4(all[0].ipv4) + "/32", "x"));
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].name, all[0].name);
  }
  // A probe to a port nobody listens on fails quickly (loopback lane).
  Lane lo{"lo", 0, 0x7f000001u, 8};
  EXPECT_FALSE(probe_lane(lo, 0, 0, 1, 0x7f000001u, 1, std::chrono::milliseconds(2000),
                          spark::net::hello::Token{}, 2));
}

TEST(FabricRing, RingOrderFollowsDirectLinksTheSameOnEveryNode) {
  EXPECT_EQ(ring_order(build_map(ring4(), all_ok)), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ring_order(build_map(triangle(), all_ok)), (std::vector<int>{0, 1, 2}));
  // 4-ring cabled 0-2, 2-1, 1-3, 3-0: the cycle is 0 2 1 3, not rank order.
  std::vector<std::vector<Lane>> odd = {
      {lane("p0", 0, "10.3.1.1/30"), lane("p1", 1, "10.3.4.2/30")},
      {lane("p0", 0, "10.3.3.1/30"), lane("p1", 1, "10.3.2.2/30")},
      {lane("p0", 0, "10.3.2.1/30"), lane("p1", 1, "10.3.1.2/30")},
      {lane("p0", 0, "10.3.4.1/30"), lane("p1", 1, "10.3.3.2/30")}};
  EXPECT_EQ(ring_order(build_map(odd, all_ok)), (std::vector<int>{0, 2, 1, 3}));
  // A line (the triangle with the 0-2 cable dead) has no cycle: no ring, relays only.
  auto line = build_map(triangle(), [](int a, int, int b, int) { return !(a == 0 && b == 2); });
  EXPECT_TRUE(ring_order(line).empty());
  // One node; a pair.
  EXPECT_EQ(ring_order(build_map({{lane("p0", 0, "10.4.1.1/30")}}, all_ok)), std::vector<int>{0});
  EXPECT_EQ(ring_order(build_map({{lane("p0", 0, "10.4.1.1/30")}, {lane("p0", 0, "10.4.1.2/30")}},
                                 all_ok)),
            (std::vector<int>{0, 1}));
}

TEST(FabricRing, RankRingKeepsEachNodesRanksTogether) {
  // Two ranks per node on the odd 4-ring above (nodes 0 2 1 3): ranks of node k are 2k, 2k+1.
  std::vector<int> node_of{0, 0, 1, 1, 2, 2, 3, 3};
  EXPECT_EQ(rank_ring({0, 2, 1, 3}, node_of), (std::vector<int>{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_TRUE(rank_ring({}, node_of).empty());
}

// A data plane bound to its job (docs/reliability.md): a node's probe listener gets strangers
// before the real probe (a silent connection, a valid-looking hello without the token, a probe
// of another job); each is dropped with a debug line, the real probe is answered at once, a
// wrong-token probe gets no lane, and a prober that reaches a listener that is not the job's
// (an echo server) does not take it as a lane.
namespace {
int connect_loopback(int port) {
  return spark::net::connect_within(0, 0x7f000001u, port, std::chrono::seconds(2)).release();
}
void send_hello(int fd, const spark::net::hello::Hello& h, const spark::net::hello::Token& t) {
  const auto bytes = spark::net::hello::encode(h, t);
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}
}  // namespace

TEST(FabricProbe, StrangersAreDroppedAndOnlyTheJobsProbeIsALane) {
  namespace hello = spark::net::hello;
  using hello::Kind;
  spark::log::configure(spark::log::Level::info, {"fabric"});
  const auto token = hello::random_token(), other_job = hello::random_token();
  const Lane lo{"lo", 0, 0x7f000001u, 8};
  spark::net::Listener listener(0x7f000001u, "probes", SOCK_NONBLOCK);
  const int port = listener.port();
  testing::internal::CaptureStderr();
  std::vector<int> strangers{connect_loopback(port), connect_loopback(port),
                             connect_loopback(port)};
  send_hello(strangers[1], {Kind::probe, 0, 0, 1}, hello::Token{});
  send_hello(strangers[2], {Kind::probe, 0, 0, 1}, other_job);
  double took = 0;
  bool real = false, wrong_token = false;
  {
    ProbeAnswerer answerer({listener.fd()}, token, 2, 1);
    const auto t0 = std::chrono::steady_clock::now();
    real = probe_lane(lo, 0, 0, 1, 0x7f000001u, port, std::chrono::seconds(3), token, 2);
    took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    wrong_token = probe_lane(lo, 0, 0, 1, 0x7f000001u, port, std::chrono::seconds(3), other_job, 2);
  }  // the silent stranger is closed with the answerer
  // A listener that echoes what it gets (another program on the probed port).
  spark::net::Listener echo(0x7f000001u, "echo");
  std::thread echoer([&] {
    spark::net::Fd c(::accept(echo.fd(), nullptr, nullptr));
    char buf[hello::kSize];
    if (::recv(c.get(), buf, sizeof buf, MSG_WAITALL) == static_cast<ssize_t>(sizeof buf))
      (void)!::send(c.get(), buf, sizeof buf, MSG_NOSIGNAL);
  });
  const bool through_echo =
      probe_lane(lo, 0, 0, 1, 0x7f000001u, echo.port(), std::chrono::seconds(3), token, 2);
  echoer.join();
  const std::string log = testing::internal::GetCapturedStderr();
  for (int fd : strangers) ::close(fd);
  spark::log::configure(spark::log::Level::warn, {});
  EXPECT_TRUE(real) << log;
  EXPECT_LT(took, 1.5) << "the silent stranger held up the real probe\n" << log;
  EXPECT_FALSE(wrong_token) << log;
  EXPECT_FALSE(through_echo) << log;
  auto count = [&](const std::string& what) { return spark::test::occurrences(log, what); };
  // Two strangers and the wrong-token probe: without this job's token (the silent one is
  // closed with the answerer, or dropped after 2 s on a slow machine).
  EXPECT_GE(count("fabric: dropped a connection from 127.0.0.1:"), 3u) << log;
  EXPECT_EQ(count("without this job's token"), 3u) << log;
  EXPECT_EQ(count("is no lane: the answer is not from 1 to 0"), 1u) << log;
}
