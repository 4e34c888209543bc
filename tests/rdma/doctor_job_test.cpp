// `sparkrun doctor` across a job: lane pairing, test rounds, the per-peer route table and the
// result rows, with made-up lanes and results (no network, no RDMA device needed).
#include <gtest/gtest.h>

#include <set>

#include "job_table.hpp"
#include "spark/error.hpp"

using namespace spark::doctor;
using spark::fabric::Lane;
using spark::fabric::parse_ipv4;

namespace {

Lane lane(const std::string& name, const std::string& ip, int prefix) {
  return Lane{name, 1, parse_ipv4(ip, "test"), prefix};
}

// Three Sparks cabled as a triangle: each cable its own /30, RDMA on both ends.
std::vector<RankLanes> triangle() {
  return {
      {"s0", {lane("roce0", "10.0.1.1", 30), lane("roce1", "10.0.3.2", 30)}, {}},
      {"s1", {lane("roce0", "10.0.2.1", 30), lane("roce1", "10.0.1.2", 30)}, {}},
      {"s2", {lane("roce0", "10.0.3.1", 30), lane("roce1", "10.0.2.2", 30)}, {}},
  };
}

}  // namespace

TEST(DoctorJob, RowsRoundTripThroughTheWireFormat) {
  std::vector<JobRow> rows = {
      {"h0", 0, "lanes", "rxe0,rxe1", "-", Status::ok, -1, "RDMA (every active device)"},
      {"h1", 3, "rdma write", "rxe0->rxe0", "rank 4 (h1)", Status::fail, -1, "no answer\tx"},
      {"h1", -1, "reach", "-", "-", Status::info, 1.5, "relay"},
  };
  auto back = decode_rows(encode_rows(rows));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0], rows[0]);
  EXPECT_EQ(back[1].detail, "no answer x");  // control characters cannot break the format
  EXPECT_EQ(back[2], rows[2]);
  EXPECT_THROW(decode_rows("a\x1f"
                           "b\n"),
               spark::Error);
  EXPECT_THROW(decode_rows("h\x1f"
                           "x\x1f"
                           "c\x1f-\x1f-\x1fok\x1f-\x1f"
                           "d\n"),
               spark::Error);
  EXPECT_THROW(decode_rows("h\x1f"
                           "0\x1f"
                           "c\x1f-\x1f-\x1fgood\x1f-\x1f"
                           "d\n"),
               spark::Error);
}

TEST(DoctorJob, LanesPairOnOneSubnetOrTheSameDeviceOfOneHost) {
  EXPECT_TRUE(lanes_pair(lane("a", "10.0.1.1", 30), "h0", lane("b", "10.0.1.2", 30), "h1"));
  EXPECT_FALSE(lanes_pair(lane("a", "10.0.1.1", 30), "h0", lane("b", "10.0.2.1", 30), "h1"));
  // Two ranks of one host share a device (same address): that lane serves them.
  EXPECT_TRUE(lanes_pair(lane("rxe0", "10.50.0.1", 24), "vm", lane("rxe0", "10.50.0.1", 24), "vm"));
  // The same address on two hosts is a misconfiguration, not a lane.
  EXPECT_FALSE(lanes_pair(lane("e", "10.0.0.1", 24), "h0", lane("e", "10.0.0.1", 24), "h1"));
}

TEST(DoctorJob, TwoRanksOnTwoRxeDevicesTestEveryLane) {
  std::vector<RankLanes> r(2,
                           RankLanes{"vm",
                                     {lane("rxe0", "10.50.0.1", 24), lane("rxe1", "10.50.1.1", 24)},
                                     {lane("d0", "10.50.0.1", 24), lane("d1", "10.50.1.1", 24)}});
  auto links = plan_links(r);
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0], (Link{0, 1, LinkKind::rdma, 0, 0, 0}));
  EXPECT_EQ(links[1], (Link{0, 1, LinkKind::rdma, 1, 1, 1}));
  EXPECT_EQ(lane_label(r[0], LinkKind::rdma, 1), "rxe1");
  EXPECT_EQ(lane_label(r[0], LinkKind::tcp, 0), "tcp:d0");
}

TEST(DoctorJob, WithoutRdmaOnOneSideThePairIsTestedOverTcp) {
  std::vector<RankLanes> r = {
      {"h0", {lane("rxe0", "10.50.0.1", 24)}, {lane("eth0", "192.0.2.2", 24)}},
      {"h1", {}, {lane("eth0", "192.0.2.3", 24), lane("eth1", "198.51.100.3", 24)}},
  };
  auto links = plan_links(r);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0], (Link{0, 1, LinkKind::tcp, 0, 0, 0}));
}

TEST(DoctorJob, RoundsNeverHoldARankTwice) {
  for (int n : {1, 2, 3, 4, 5, 8}) {
    auto rounds = plan_rounds(n);
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (auto [a, b] : round) {
        EXPECT_TRUE(busy.insert(a).second && busy.insert(b).second) << "n=" << n;
        EXPECT_TRUE(seen.insert({a, b}).second);
      }
    }
    EXPECT_EQ(static_cast<int>(seen.size()), n * (n - 1) / 2) << "n=" << n;
  }
  EXPECT_EQ(plan_rounds(4).size(), 3u);  // a perfect schedule for 4 ranks
}

TEST(DoctorJob, TriangleEveryPairDirectOnItsCable) {
  auto r = triangle();
  auto links = plan_links(r);
  ASSERT_EQ(links.size(), 3u);  // one cable per pair
  auto map = rank_map(r, links);
  EXPECT_TRUE(map.fully_connected());
  auto rows = reach_rows(r, map);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].peer, "rank 1 (s1)");
  EXPECT_EQ(rows[0].lane, "roce0");
  EXPECT_EQ(rows[0].status, Status::ok);
  EXPECT_NE(rows[0].detail.find("roce0(10.0.1.1)->roce1(10.0.1.2)"), std::string::npos)
      << rows[0].detail;
  EXPECT_EQ(verdict(rows).exit_code(), 0);
}

TEST(DoctorJob, AFailedCableMeansRelayAndAnIsolatedRankFails) {
  auto r = triangle();
  auto links = plan_links(r);
  // The 0-2 cable's round trip failed: 0 reaches 2 through 1 (info, a ring needs that).
  std::vector<Link> passed = {links[0], links[2]};
  ASSERT_EQ(links[1].a, 0);
  ASSERT_EQ(links[1].b, 2);
  auto rows = reach_rows(r, rank_map(r, passed));
  EXPECT_EQ(rows[1].status, Status::info);
  EXPECT_NE(rows[1].detail.find("relay via rank 1 (s1)"), std::string::npos) << rows[1].detail;
  // Nothing passed with rank 2: it cannot be reached at all.
  rows = reach_rows(r, rank_map(r, {links[0]}));
  EXPECT_EQ(rows[1].status, Status::fail);
  EXPECT_NE(rows[1].detail.find("UNREACHABLE"), std::string::npos);
  EXPECT_EQ(verdict(rows).exit_code(), 2);
}

TEST(DoctorJob, TcpLanesFollowRdmaLanesInTheRouteTable) {
  std::vector<RankLanes> r = {
      {"h", {}, {lane("eth0", "192.0.2.2", 24)}},
      {"h", {}, {lane("eth0", "192.0.2.2", 24)}},
  };
  auto links = plan_links(r);
  ASSERT_EQ(links.size(), 1u);
  auto rows = reach_rows(r, rank_map(r, links));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].lane, "tcp:eth0");
  EXPECT_EQ(rows[0].status, Status::ok);
}

TEST(DoctorJob, TableHasTheColumnsAndTheVerdict) {
  std::vector<JobRow> rows = {
      {"h0", 0, "rdma write", "rxe0->rxe0", "rank 1 (h0)", Status::ok, 12.5, "median"},
  };
  auto t = render_job(rows);
  EXPECT_EQ(t.rfind("HOST  RANK  CHECK       LANE        PEER         RESULT  LATENCY  DETAIL", 0),
            0u)
      << t;
  EXPECT_NE(t.find("all well"), std::string::npos);
  EXPECT_EQ(verdict(rows).exit_code(), 0);
  rows.push_back({"h0", 0, "MTU", "rxe0", "-", Status::warn, -1, "1500"});
  EXPECT_NE(render_job(rows).find("0 problem(s), 1 warning(s)"), std::string::npos);
  EXPECT_EQ(verdict(rows).exit_code(), 1);
  EXPECT_EQ(format_latency(12.34), "12.3 us");
  EXPECT_EQ(format_latency(1250), "1.25 ms");
}

// The host table and the job table end with the same verdict (one rule over the rows' status):
// info rows count for nothing, FAIL and WARN rows each for their own count.
TEST(DoctorJob, HostAndJobTablesShareTheVerdict) {
  const std::vector<Row> host = {{"MTU", "rxe0", Status::warn, "1500"},
                                 {"locked memory", "ulimit -l", Status::fail, "8 MiB"},
                                 {"library", "PMIx", Status::info, "-"}};
  std::vector<JobRow> job;
  for (const Row& r : host) job.push_back(host_row("h0", 0, r));
  const Verdict v = verdict(job);
  EXPECT_EQ(v.fails, 1);
  EXPECT_EQ(v.warns, 1);
  EXPECT_EQ(v.exit_code(), 2);  // a FAIL row outweighs the WARN row
  EXPECT_EQ(v.line(), "sparkrun doctor: 1 problem(s), 1 warning(s)\n");
  EXPECT_EQ(verdict(host).line(), v.line());
  EXPECT_TRUE(render(host).ends_with(v.line()));
  EXPECT_TRUE(render_job(job).ends_with(v.line()));
  EXPECT_EQ(Verdict{}.line(), "sparkrun doctor: all well\n");
  EXPECT_EQ(Verdict{}.exit_code(), 0);
}
