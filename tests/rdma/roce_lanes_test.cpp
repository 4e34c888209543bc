// Per-peer RDMA lanes from the fabric map (libspark/src/fabric/roce_lanes.*): which lane pairs
// a rank uses toward each peer, on the shapes Spark owners cable (pair, both PCIe halves,
// triangle, 4-ring) and when the binding plan's lanes sit on the wrong cable.
#include <gtest/gtest.h>

#include "fabric/roce_lanes.hpp"

using namespace spark::fabric;

namespace {

Lane lane(const std::string& name, int port, const std::string& cidr) {
  auto [ip, prefix] = parse_cidr(cidr, "test");
  return Lane{name, port, ip, prefix};
}

const std::vector<std::string> kNames{"spark1", "spark2", "spark3", "spark4"};

// One Spark port cabled to the other Spark, both PCIe halves of the port on one subnet (what
// a DGX Spark shows: rocep1s0f0 and roceP2p1s0f0 are the two halves of QSFP port 0).
std::vector<std::vector<Lane>> pair_two_halves() {
  return {{lane("rocep1s0f0", 0, "10.0.0.1/24"), lane("roceP2p1s0f0", 0, "10.0.0.3/24"),
           lane("rocep1s0f1", 1, "10.9.0.1/24")},
          {lane("rocep1s0f0", 0, "10.0.0.2/24"), lane("roceP2p1s0f0", 0, "10.0.0.4/24")}};
}

// Triangle: port 0 to one neighbour, port 1 to the other (three point-to-point subnets).
std::vector<std::vector<Lane>> triangle() {
  return {{lane("rxe0", 0, "10.60.0.1/24"), lane("rxe1", 1, "10.60.2.1/24")},
          {lane("rxe0", 0, "10.60.0.2/24"), lane("rxe1", 1, "10.60.1.2/24")},
          {lane("rxe0", 0, "10.60.1.3/24"), lane("rxe1", 1, "10.60.2.3/24")}};
}

std::vector<std::vector<Lane>> ring4() {
  return {{lane("p0", 0, "10.2.1.1/30"), lane("p1", 1, "10.2.4.2/30")},
          {lane("p0", 0, "10.2.2.1/30"), lane("p1", 1, "10.2.1.2/30")},
          {lane("p0", 0, "10.2.3.1/30"), lane("p1", 1, "10.2.2.2/30")},
          {lane("p0", 0, "10.2.4.1/30"), lane("p1", 1, "10.2.3.2/30")}};
}

}  // namespace

TEST(RoceLanes, BothPcieHalvesAreMatchedOnceEach) {
  auto l = pair_two_halves();
  auto map = rdma_candidate_map(l);
  auto p = choose_roce_peer(map, l, kNames, 0, 1, {}, {});
  ASSERT_EQ(p.kind, RocePeer::Kind::roce);
  // 2 x 2 same-subnet candidates, matched to half A <-> A, half B <-> B; port 1 (other subnet)
  // is not used toward this peer.
  EXPECT_EQ(p.pairs, (std::vector<LanePair>{{0, 0}, {1, 1}}));
  EXPECT_FALSE(p.map_won);
  EXPECT_EQ(describe_roce_peer(p, l, kNames, 0, 1),
            "spark1 -> spark2: roce rocep1s0f0(10.0.0.1)->rocep1s0f0(10.0.0.2) "
            "roceP2p1s0f0(10.0.0.3)->roceP2p1s0f0(10.0.0.4)");
}

TEST(RoceLanes, BothEndsAgreeOnThePairing) {
  for (auto l : {pair_two_halves(), triangle()}) {
    auto map = rdma_candidate_map(l);
    for (int a = 0; a < static_cast<int>(l.size()); ++a)
      for (int b = 0; b < static_cast<int>(l.size()); ++b) {
        if (a == b) continue;
        auto ab = choose_roce_peer(map, l, kNames, a, b, {}, {});
        auto ba = choose_roce_peer(map, l, kNames, b, a, {}, {});
        ASSERT_EQ(ab.pairs.size(), ba.pairs.size());
        for (std::size_t k = 0; k < ab.pairs.size(); ++k) {
          EXPECT_EQ(ab.pairs[k].local, ba.pairs[k].remote);
          EXPECT_EQ(ab.pairs[k].remote, ba.pairs[k].local);
        }
      }
  }
}

TEST(RoceLanes, TriangleUsesEachNeighboursOwnCable) {
  auto l = triangle();
  auto map = rdma_candidate_map(l);
  EXPECT_EQ(describe_roce_peer(choose_roce_peer(map, l, kNames, 0, 1, {}, {}), l, kNames, 0, 1),
            "spark1 -> spark2: roce rxe0(10.60.0.1)->rxe0(10.60.0.2)");
  EXPECT_EQ(describe_roce_peer(choose_roce_peer(map, l, kNames, 0, 2, {}, {}), l, kNames, 0, 2),
            "spark1 -> spark3: roce rxe1(10.60.2.1)->rxe1(10.60.2.3)");
  EXPECT_EQ(describe_roce_peer(choose_roce_peer(map, l, kNames, 2, 1, {}, {}), l, kNames, 2, 1),
            "spark3 -> spark2: roce rxe0(10.60.1.3)->rxe1(10.60.1.2)");
}

TEST(RoceLanes, TheMapWinsOverAPlanOnTheWrongCable) {
  auto l = triangle();
  auto map = rdma_candidate_map(l);
  // The plan prefers port 0 (rxe0) on spark1, but spark3 is cabled to its port 1.
  auto p = choose_roce_peer(map, l, kNames, 0, 2, {"rxe0"}, {});
  ASSERT_EQ(p.kind, RocePeer::Kind::roce);
  EXPECT_TRUE(p.map_won);
  EXPECT_EQ(p.pairs, (std::vector<LanePair>{{1, 1}}));
  EXPECT_EQ(describe_roce_peer(p, l, kNames, 0, 2),
            "spark1 -> spark3: roce rxe1(10.60.2.1)->rxe1(10.60.2.3) (map wins: SPARK_LANES=rxe0 "
            "of spark1 does not reach spark3; the fabric map's lanes used)");
  // The same preference toward spark2 (on rxe0's cable) is honoured.
  auto q = choose_roce_peer(map, l, kNames, 0, 1, {"rxe0"}, {});
  EXPECT_FALSE(q.map_won);
  EXPECT_EQ(q.pairs, (std::vector<LanePair>{{0, 0}}));
  // Preferences restrict the halves too: only half A of both ends.
  auto h = pair_two_halves();
  auto hp = choose_roce_peer(rdma_candidate_map(h), h, kNames, 0, 1, {"rocep1s0f0"},
                             {"rocep1s0f0", "roceP2p1s0f0"});
  EXPECT_EQ(hp.pairs, (std::vector<LanePair>{{0, 0}}));
}

TEST(RoceLanes, RingOppositeNodeGoesThroughTheNeighbourTheMapNames) {
  auto l = ring4();
  auto map = rdma_candidate_map(l);
  auto p = choose_roce_peer(map, l, kNames, 0, 2, {}, {});
  EXPECT_EQ(p.kind, RocePeer::Kind::relay);
  EXPECT_EQ(p.via, map.route(0, 2).via);
  EXPECT_EQ(describe_roce_peer(p, l, kNames, 0, 2),
            "spark1 -> spark3: roce relay via " + kNames[static_cast<std::size_t>(p.via)]);
  // Through the job view the links go to the relaying node, over the cable toward it.
  std::vector<std::string> lanes;
  for (const auto& n : l) lanes.push_back(encode_lanes(n));
  auto job = make_roce_job({"spark1", "spark2", "spark3", "spark4"}, lanes, {"", "", "", ""});
  auto q = job.peer(0, 2);
  ASSERT_EQ(q.kind, RocePeer::Kind::relay);
  EXPECT_EQ(q.via, 1);
  EXPECT_EQ(job.speaker(1), 1);
  EXPECT_EQ(job.describe(0, 2, q),
            "spark1 -> spark3: roce relay via spark2 p0(10.2.1.1)->p1(10.2.1.2)");
  // The relay's side toward spark3 mirrors spark3's toward the relay.
  auto r = job.peer(2, 0);
  EXPECT_EQ(r.via, 1);
  EXPECT_EQ(job.describe(2, 0, r),
            "spark3 -> spark1: roce relay via spark2 p1(10.2.2.2)->p0(10.2.2.1)");
}

TEST(RoceLanes, LongerRelayChainsStayOnTcpWithTheReason) {
  // A line of four: 1 and 4 are three hops apart.
  std::vector<std::vector<Lane>> l{{lane("p0", 0, "10.3.1.1/30")},
                                   {lane("p0", 0, "10.3.2.1/30"), lane("p1", 1, "10.3.1.2/30")},
                                   {lane("p0", 0, "10.3.3.1/30"), lane("p1", 1, "10.3.2.2/30")},
                                   {lane("p1", 1, "10.3.3.2/30")}};
  auto map = rdma_candidate_map(l);
  auto p = choose_roce_peer(map, l, kNames, 0, 3, {}, {});
  EXPECT_EQ(p.kind, RocePeer::Kind::tcp);
  EXPECT_EQ(p.note,
            "tcp, spark4 is 3 hops from spark1 and the RoCE relay forwards over one intermediate "
            "node only");
  EXPECT_EQ(choose_roce_peer(map, l, kNames, 0, 2, {}, {}).kind, RocePeer::Kind::relay);
}

TEST(RoceLanes, TcpOnlyWhereNoRdmaLaneExistsWithTheReason) {
  std::vector<std::vector<Lane>> l{
      {lane("rxe0", 0, "10.60.0.1/24")}, {lane("rxe0", 0, "10.70.0.2/24")}, {}};
  auto map = rdma_candidate_map(l);
  EXPECT_EQ(describe_roce_peer(choose_roce_peer(map, l, kNames, 0, 1, {}, {}), l, kNames, 0, 1),
            "spark1 -> spark2: tcp, no RDMA lane of spark1 shares a subnet with spark2, not even "
            "through a relay");
  auto p = choose_roce_peer(map, l, kNames, 0, 2, {}, {});
  EXPECT_EQ(p.kind, RocePeer::Kind::tcp);
  EXPECT_NE(p.note.find("spark3 has no RDMA lane"), std::string::npos) << p.note;
  EXPECT_NE(choose_roce_peer(map, l, kNames, 2, 0, {}, {}).note.find("spark3 has no RDMA lane"),
            std::string::npos);
}

namespace {
RoceJob job_of(std::vector<std::vector<Lane>> l, std::vector<std::string> names) {
  RoceJob j;
  j.hosts = std::move(names);
  for (std::size_t n = 0; n < l.size(); ++n) j.node_of.push_back(static_cast<int>(n));
  j.prefer.assign(l.size(), {});
  j.lanes = std::move(l);
  j.map = rdma_candidate_map(j.lanes);
  return j;
}
}  // namespace

// SPARK_DATA_NET's tcp map plans every node pair as tcp; in a job that mixes roce and tcp the
// wire-up refuses (registry.cpp, a ConfigError on every rank before any fence) the shapes in
// which a node would have no tcp transport for that map's fence or a relay would wait for a
// roce pair's connection; it lets through the mixed shapes tcp's map serves.
TEST(RoceLanes, MixedJobsThatTcpsOwnMapCannotServe) {
  // A line of four (a 4-ring with one cable out): 1 <-> 4 on tcp; 2 and 3 reach all on roce.
  auto line = job_of({{lane("p0", 0, "10.3.1.1/30")},
                      {lane("p0", 0, "10.3.2.1/30"), lane("p1", 1, "10.3.1.2/30")},
                      {lane("p0", 0, "10.3.3.1/30"), lane("p1", 1, "10.3.2.2/30")},
                      {lane("p1", 1, "10.3.3.2/30")}},
                     kNames);
  EXPECT_EQ(line.mixed_tcp_map_problem(),
            "spark1 -> spark4: tcp, spark4 is 3 hops from spark1 and the RoCE relay forwards "
            "over one intermediate node only; but spark2 reaches every node over RoCE, so it has "
            "no tcp transport to take part in the tcp map's fence and relays");
  // A 6-ring: every node has its opposite on tcp, but the pairs two hops apart are relayed
  // over roce, which tcp's map would route through a tcp relay too.
  std::vector<std::vector<Lane>> ring6(6);
  for (int n = 0; n < 6; ++n) {
    const int next = (n + 1) % 6;
    ring6[n].push_back(lane("p0", 0, "10.4." + std::to_string(n) + ".1/30"));
    ring6[next].push_back(lane("p1", 1, "10.4." + std::to_string(n) + ".2/30"));
  }
  const auto six = job_of(ring6, {"s1", "s2", "s3", "s4", "s5", "s6"});
  EXPECT_EQ(six.mixed_tcp_map_problem(),
            "s1 -> s4: tcp, s4 is 3 hops from s1 and the RoCE relay forwards over one "
            "intermediate node only; but the tcp map would also route s1 -> s3 (roce via s2) "
            "through a tcp relay that waits for it");
  // Served: a triangle whose third node has no RDMA lane (both its pairs on tcp, no relay),
  // every pair on roce (the 4-ring), every pair on tcp.
  EXPECT_EQ(job_of({triangle()[0], triangle()[1], {}}, {"a", "b", "c"}).mixed_tcp_map_problem(),
            "");
  EXPECT_EQ(job_of(ring4(), kNames).mixed_tcp_map_problem(), "");
  EXPECT_EQ(job_of({{}, {}}, {"a", "b"}).mixed_tcp_map_problem(), "");
}
