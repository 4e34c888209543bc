// `sparkrun doctor --bandwidth`'s planning, wire format and judgement with made-up
// measurements, and one real stream over loopback (the counters of `lo` move by at least the
// payload); the --json document's shape (its schema check runs in doctor.bandwidth_netns).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <future>
#include <thread>

#include "bandwidth.hpp"
#include "report.hpp"
#include "spark/error.hpp"

using namespace spark::doctor;
using spark::fabric::Lane;
using spark::fabric::parse_ipv4;

namespace {

Lane lane(const std::string& name, const std::string& ip, int prefix) {
  return Lane{name, 1, parse_ipv4(ip, "test"), prefix};
}

StreamEnd end(bool sender, std::uint64_t payload, std::int64_t counter, double seconds,
              std::int64_t mbps = -1) {
  StreamEnd e;
  e.sender = sender;
  e.netdev = sender ? "to1" : "to0";
  e.payload = payload;
  e.counter = counter;
  e.seconds = seconds;
  e.link_mbps = mbps;
  e.mtu = 9000;
  return e;
}

}  // namespace

// Cables are between the first ranks of two hosts, on lane pairs of one subnet, both ways.
TEST(DoctorBandwidth, StreamsRunBetweenTheFirstRanksOfTwoHostsBothWays) {
  std::vector<RankLanes> r = {
      {"h0", {}, {lane("to1", "10.0.1.1", 30), lane("to2", "10.0.3.2", 30)}},
      {"h0", {}, {lane("to1", "10.0.1.1", 30)}},  // a second rank of h0: no streams
      {"h1", {}, {lane("to0", "10.0.1.2", 30)}},
      {"h2", {}, {lane("to0", "10.0.3.1", 30)}},
  };
  const auto s = plan_streams(r);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0], (Stream{0, 2, 0, 0, true}));
  EXPECT_EQ(s[1], (Stream{0, 2, 0, 0, false}));
  EXPECT_EQ(s[2], (Stream{0, 3, 1, 0, true}));
  EXPECT_EQ(s[3], (Stream{0, 3, 1, 0, false}));
  r.resize(2);  // one host: no cable
  EXPECT_TRUE(plan_streams(r).empty());
  // Both ranks with RDMA lanes: the stream is an RDMA WRITE stream on the RDMA lane pair.
  std::vector<RankLanes> rd = {
      {"h0", {lane("rxe0", "10.0.5.1", 24)}, {lane("eth0", "10.0.5.1", 24)}},
      {"h1", {lane("rxe0", "10.0.5.2", 24)}, {lane("eth0", "10.0.5.2", 24)}},
  };
  const auto sr = plan_streams(rd);
  ASSERT_EQ(sr.size(), 2u);
  EXPECT_EQ(sr[0], (Stream{0, 1, 0, 0, true, LinkKind::rdma}));
  rd[1].rdma.clear();  // one side without RDMA: tcp
  EXPECT_EQ(plan_streams(rd)[0].kind, LinkKind::tcp);
}

// Two lane pairs between two hosts (two cables, or both PCIe halves of a port): their single
// streams, then all lanes at once each way, as a job stripes them.
TEST(DoctorBandwidth, TwoLanePairsAlsoGetAStripedStreamEachWay) {
  std::vector<RankLanes> r = {
      {"h0", {lane("rxe0", "10.0.1.1", 24), lane("rxe1", "10.0.2.1", 24)}, {}},
      {"h1", {lane("rxe0", "10.0.1.2", 24), lane("rxe1", "10.0.2.2", 24)}, {}},
  };
  const auto s = plan_streams(r);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_TRUE(s[3].stripe.empty());
  const std::vector<std::pair<int, int>> both = {{0, 0}, {1, 1}};
  EXPECT_EQ(s[4], (Stream{0, 1, 0, 0, true, LinkKind::rdma, both}));
  EXPECT_EQ(s[5], (Stream{0, 1, 0, 0, false, LinkKind::rdma, both}));
  EXPECT_EQ(s[4].pairs(), both);
  EXPECT_EQ(s[0].pairs(), (std::vector<std::pair<int, int>>{{0, 0}}));
  // One lane of h1 facing both of h0's (a lane would serve two connections at once): none.
  r[1].rdma = {lane("rxe0", "10.0.0.2", 16)};
  r[0].rdma = {lane("rxe0", "10.0.1.1", 16), lane("rxe1", "10.0.2.1", 16)};
  for (const auto& st : plan_streams(r)) EXPECT_TRUE(st.stripe.empty());
}

// RDMA ports count their data in 4-byte words (a fake sysfs tree); a device without the
// counters (rxe) reads as unread, and a port counter short of the payload fails like a
// netdev's.
TEST(DoctorBandwidth, RdmaPortCountersAreReadInBytesAndChecked) {
  const std::string root = ::testing::TempDir() + "doctor_sysfs";
  const std::string dir = root + "/class/infiniband/mlx5_0/ports/1/counters";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  { std::ofstream(dir + "/port_xmit_data") << "250\n"; }
  EXPECT_EQ(rdma_port_bytes(root, "mlx5_0", 1, true), 1000);
  EXPECT_EQ(rdma_port_bytes(root, "mlx5_0", 1, false), -1);
  EXPECT_EQ(rdma_port_bytes(root, "rxe0", 1, true), -1);
  auto tx = end(true, 1 << 20, (1 << 20) + 100, 0);
  tx.port_counter = 4096;  // the payload left on another port
  auto c = judge_stream("a", "b", "mlx5_0->mlx5_0", tx, end(false, 1 << 20, (1 << 20) + 99, 0.1),
                        BandwidthLimits{}, 0);
  EXPECT_EQ(c.status, Status::fail) << c.detail;
  EXPECT_NE(c.detail.find("RDMA ports +0.0 MiB out"), std::string::npos) << c.detail;
  EXPECT_EQ(c.tx_port_bytes, 4096);
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}

// A striped end adds its lanes' bytes and counters, keeps the longest time, names every
// interface and every error; it is judged against the sum of its lanes' own streams.
TEST(DoctorBandwidth, AStripedEndCombinesItsLanesAndIsJudgedAgainstTheirSum) {
  auto a = end(false, 100, 120, 1.0), b = end(false, 50, 70, 2.0);
  b.netdev = "to9";
  b.error = "recv: reset";
  const auto c = combine_ends({a, b});
  EXPECT_EQ(c.payload, 150u);
  EXPECT_EQ(c.counter, 190);
  EXPECT_EQ(c.seconds, 2.0);
  EXPECT_EQ(c.netdev, "to0+to9");
  EXPECT_EQ(c.error, "to9: recv: reset");
  const std::uint64_t gb = 1'000'000'000 / 8;
  const std::pair<double, std::string> sum{4.0, "the sum of its lanes' own streams"};
  auto r = judge_stream("a", "b", "rxe0->rxe0+rxe1->rxe1", end(true, gb, gb + 1, 0),
                        end(false, gb, gb + 1, 1.0), BandwidthLimits{}, 0, &sum);
  EXPECT_TRUE(r.striped);
  EXPECT_EQ(r.status, Status::fail) << r.detail;  // 1 of 4 Gb/s: the lanes share a bottleneck
  EXPECT_NE(r.detail.find("25 % of 4.00 Gb/s (the sum of its lanes' own streams)"),
            std::string::npos)
      << r.detail;
  EXPECT_EQ(cable_row("h0", 0, r).check, "striped");
}

TEST(DoctorBandwidth, StreamEndsRoundTripThroughTheWireFormat) {
  std::vector<StreamEnd> ends = {end(true, 1000, 1100, 0), end(false, 1000, 1080, 0.25, 10000)};
  ends[0].port_counter = 1040;
  ends[1].test = 7;
  ends[1].error = "recv: reset\tby peer";
  auto back = decode_stream_ends(encode_stream_ends(ends));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], ends[0]);
  EXPECT_EQ(back[1].seconds, 0.25);
  EXPECT_EQ(back[1].error, "recv: reset by peer");
  EXPECT_THROW(decode_stream_ends("1\x1fzz\n"), spark::Error);
  EXPECT_THROW(decode_stream_ends("x\x1ftx\x1f"
                                  "a\x1f"
                                  "1\x1f"
                                  "1\x1f"
                                  "0\x1f-1\x1f"
                                  "0\x1f\n"),
               spark::Error);
}

// Against the link speed: 9.4 of 10 Gb/s ok, 7 WARN, 3 FAIL (the 13 Gb/s port of a 100 Gb/s
// fabric); the thresholds are options.
TEST(DoctorBandwidth, RateIsJudgedAgainstTheLinkSpeed) {
  const std::uint64_t gb = 1'000'000'000 / 8;  // bytes per Gb
  BandwidthLimits lim;
  auto judge = [&](double gbps) {
    const auto payload = static_cast<std::uint64_t>(gbps * gb);
    return judge_stream("rank 0 (h0)", "rank 1 (h1)", "tcp:to1->to0",
                        end(true, payload, static_cast<std::int64_t>(payload) + 50, 0),
                        end(false, payload, static_cast<std::int64_t>(payload) + 40, 1.0, 10000),
                        lim, 0);
  };
  auto c = judge(9.4);
  EXPECT_EQ(c.status, Status::ok) << c.detail;
  EXPECT_NEAR(c.percent, 94, 0.5);
  EXPECT_EQ(c.reference, "link speed");
  EXPECT_NE(c.detail.find("rank 0 (h0) -> rank 1 (h1) 9.40 Gb/s, 94 % of 10.00 Gb/s"),
            std::string::npos)
      << c.detail;
  EXPECT_EQ(judge(7).status, Status::warn);
  c = judge(3);
  EXPECT_EQ(c.status, Status::fail);
  EXPECT_NE(c.detail.find("below 50 %"), std::string::npos) << c.detail;
  lim.fail_below = 20;
  lim.warn_below = 25;
  EXPECT_EQ(judge(3).status, Status::ok);
  lim.relative = true;  // --relative: the run's fastest direction, not the reported speed
  c = judge_stream("a", "b", "l", end(true, gb, gb + 9, 0), end(false, gb, gb + 9, 1.0, 10000), lim,
                   1.0);
  EXPECT_EQ(c.reference, "the fastest direction of this run");
  EXPECT_NEAR(c.percent, 100, 0.5);
  lim.link_gbps = 40;  // --link-gbps wins over the reported speed
  c = judge(9.4);
  EXPECT_EQ(c.status, Status::warn);
  EXPECT_EQ(c.reference, "--link-gbps");
}

// No reported speed (veth, emulation): the fastest direction of the run is the reference, so
// one throttled direction among good ones fails.
TEST(DoctorBandwidth, WithoutALinkSpeedTheFastestDirectionIsTheReference) {
  BandwidthLimits lim;
  const std::uint64_t mb100 = 100'000'000;  // in 1 s: 0.8 Gb/s, the fastest of the run
  auto c = judge_stream("a", "b", "tcp:x->y", end(true, mb100, mb100 + 99, 0),
                        end(false, mb100, mb100 + 99, 1.0), lim, 0.8);
  EXPECT_EQ(c.reference, "the fastest direction of this run");
  EXPECT_EQ(c.status, Status::ok) << c.detail;
  c = judge_stream("a", "b", "tcp:x->y", end(true, mb100 / 10, mb100, 0),
                   end(false, mb100 / 10, mb100, 1.0), lim, 0.8);
  EXPECT_EQ(c.status, Status::fail) << c.detail;  // 10 % of its sibling
  EXPECT_NE(c.detail.find("80 Mb/s, 10 % of 800 Mb/s"), std::string::npos) << c.detail;
}

// An RDMA stream whose "done" did not arrive in its window (a slow link): the sender's
// completed writes, over its own time, are the measurement.
TEST(DoctorBandwidth, WithoutTheReceiversCountTheSendersCompletionsCount) {
  BandwidthLimits lim;
  lim.link_gbps = 1;
  auto c = judge_stream("a", "b", "rxe0->rxe0", end(true, 12'500'000, 13'000'000, 1.0),
                        end(false, 0, 13'000'000, 0), lim, 0);
  EXPECT_NEAR(c.gbps, 0.1, 1e-9);
  EXPECT_EQ(c.status, Status::fail) << c.detail;  // 10 % of 1 Gb/s
  EXPECT_EQ(c.payload, 12'500'000u);
}

// Counters that do not show the payload: the bytes took another interface. An error at either
// end, or no byte at all, fails with it.
TEST(DoctorBandwidth, CountersMustShowThePayloadOnTheLanesInterfaces) {
  BandwidthLimits lim;
  auto c = judge_stream("a", "b", "tcp:to1->to0", end(true, 1 << 20, 1024, 0),
                        end(false, 1 << 20, (1 << 20) + 900, 0.1), lim, 0);
  EXPECT_EQ(c.status, Status::fail);
  EXPECT_NE(c.detail.find("took another path"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("left to1 +0.0 MiB"), std::string::npos) << c.detail;
  auto tx = end(true, 10, 20, 0);
  tx.error = "no go from the receiver";
  c = judge_stream("a", "b", "l", tx, end(false, 0, 0, 0), lim, 0);
  EXPECT_EQ(c.status, Status::fail);
  EXPECT_NE(c.detail.find("sender: no go from the receiver"), std::string::npos) << c.detail;
  c = judge_stream("a", "b", "l", end(true, 0, 0, 0), end(false, 0, 0, 0), lim, 0);
  EXPECT_NE(c.detail.find("no byte arrived"), std::string::npos) << c.detail;
}

// A real stream over a socket pair on loopback: the receiver counts what the sender sent, the
// sender waits for the receiver's go and its close; both bounded.
TEST(DoctorBandwidth, AStreamMovesBytesAndEndsByItself) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto rx = std::async(std::launch::async, [&] {
    auto e = stream_receive(sv[1], 3, "/sys", "lo", deadline);
    ::close(sv[1]);
    return e;
  });
  auto tx = stream_send(sv[0], 3, "/sys", "lo", std::chrono::milliseconds(200), deadline);
  ::close(sv[0]);
  auto r = rx.get();
  EXPECT_EQ(tx.error, "");
  EXPECT_EQ(r.error, "");
  EXPECT_GT(tx.payload, 0u);
  EXPECT_EQ(r.payload, tx.payload);
  EXPECT_GT(r.seconds, 0.05);
  EXPECT_LT(std::chrono::steady_clock::now(), deadline);
}

TEST(DoctorBandwidth, JsonReportHasEveryRowAndCableAndTheExitCode) {
  std::vector<JobRow> rows = {
      {"h0", 0, "tcp round trip", "tcp:a->b", "rank 1 (h1)", Status::ok, 12.5, "median"},
      {"h0", -1, "MTU", "-", "-", Status::warn, -1, "1500"}};
  CableResult c;
  c.from = "rank 0 (h0)";
  c.to = "rank 1 (h1)";
  c.lane = "tcp:a->b";
  c.gbps = 1.5;
  c.status = Status::ok;
  const auto doc = nlohmann::json::parse(json_report({"bandwidth", 2}, rows, {c}));
  EXPECT_EQ(doc["schema"], "sparkrun-doctor/1");
  EXPECT_EQ(doc["mode"], "bandwidth");
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["latency_us"], 12.5);
  EXPECT_TRUE(doc["rows"][1]["rank"].is_null());
  EXPECT_TRUE(doc["rows"][1]["lane"].is_null());
  EXPECT_EQ(doc["cables"][0]["gbps"], 1.5);
  EXPECT_TRUE(doc["cables"][0]["reference_gbps"].is_null());
  EXPECT_EQ(doc["summary"]["warnings"], 1);
  EXPECT_EQ(doc["exit_code"], 1);
  rows[0].status = Status::fail;
  EXPECT_EQ(nlohmann::json::parse(json_report({"job", 2}, rows, {}))["exit_code"], 2);
}
