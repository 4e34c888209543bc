// The launcher's readings of the flight recorders, without a job: who diverged, the
// OpenMetrics text, the slow-rank watch, the --metrics-port address.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "flight_reader.hpp"
#include "metrics_server.hpp"
#include "slow_lane.hpp"
#include "slow_rank.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

namespace flight = protocol::flight;

// One operation of a rank: op index into {"allreduce", "broadcast"}; the wait on `late`.
RankFlight::Op op(std::uint64_t seq, std::uint8_t name, int late = -1,
                  flight::State state = flight::State::done) {
  RankFlight::Op o{};
  o.e.seq = seq;
  o.e.bytes = 1024;
  o.e.peer = -1;
  o.e.op = name;
  o.e.wait_peer = late;
  if (late >= 0) {
    o.e.wait_ns = 1'000'000;
    o.e.end_ns = 3'000'000;
  }
  o.state = state;
  o.lane = "shm";
  return o;
}

RankFlight rank(int r, std::vector<RankFlight::Op> ops) {
  RankFlight f;
  f.rank = r;
  f.comms = {"world"};
  f.ops = {"allreduce", "broadcast"};
  f.entries = std::move(ops);
  f.begun = f.completed = f.entries.empty() ? 0 : f.entries.back().e.seq;
  return f;
}

TEST(FlightReader, NamesTheRankThatCalledAnotherCollective) {
  const std::vector<RankFlight> ranks = {
      rank(0, {op(4, 0), op(5, 0)}), rank(1, {op(4, 0), op(5, 0)}), rank(2, {op(4, 0), op(5, 1)})};
  const auto notes = divergence_notes(ranks);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "rank 2 diverged on world at seq 5: it called broadcast where 2 other rank(s) called "
            "allreduce");
}

TEST(FlightReader, NamesTheRankThatIsBehindAndNothingWhenAllAgree) {
  EXPECT_TRUE(divergence_notes({rank(0, {op(7, 0)}), rank(1, {op(7, 0)})}).empty());
  const auto notes = divergence_notes(
      {rank(0, {op(7, 0), op(8, 0)}), rank(1, {op(7, 0)}), rank(2, {op(7, 0), op(8, 0)})});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "rank 1 is behind on world: its last operation is allreduce seq 7, other ranks "
            "reached seq 8");
}

TEST(FlightReader, DescribesAWaitingOperation) {
  RankFlight f = rank(0, {op(9, 0, 2, flight::State::running)});
  f.entries[0].e.waiting = 1;
  f.read_ns = 2'001'000'000;  // 2 s after the wait began
  EXPECT_EQ(describe_entry(f, f.entries[0]),
            "allreduce seq 9 1.0 KiB: waiting 2.00 s for data from rank 2 on shm");
}

TEST(Metrics, OpenMetricsTextHasCumulativeBucketsAndEndsWithEof) {
  RankFlight f = rank(0, {op(3, 0)});
  f.completed = 3;
  f.bytes_done = 2048;
  f.wait_buckets.assign(flight::kWaitBucketCount, 0);
  f.wait_buckets[0] = 5;  // <= 1 ms
  f.wait_buckets[2] = 1;  // <= 100 ms
  f.wait_sum_ns = 60'000'000;
  const std::string text =
      openmetrics_text("job7", {{0, "h1", false, &f}, {1, "h1", true, nullptr}}, 1);
  EXPECT_NE(text.find("sparkrun_job_failures_total{job=\"job7\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_failed{rank=\"1\",host=\"h1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_operations_total{rank=\"0\",host=\"h1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_bytes_total{rank=\"0\",host=\"h1\"} 2048\n"),
            std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_wait_seconds_bucket{rank=\"0\",host=\"h1\",le=\"0.01\"} 5\n"),
            std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_wait_seconds_bucket{rank=\"0\",host=\"h1\",le=\"+Inf\"} 6\n"),
            std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_wait_seconds_sum{rank=\"0\",host=\"h1\"} 0.06\n"),
            std::string::npos);
  EXPECT_EQ(text.find("rank=\"1\",host=\"h1\"} 0"), std::string::npos)
      << "no counters without a recorder";
  ASSERT_GE(text.size(), 6u);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
}

// A multi-host job's exposition: each family once, every host's samples, the launcher's job
// failures only (Prometheus refuses a family defined twice or a series given twice).
TEST(Metrics, HostsTextsMergeIntoOneExposition) {
  RankFlight a = rank(0, {op(3, 0)}), b = rank(1, {op(3, 0)});
  a.completed = b.completed = 3;
  a.lanes = {{1, 0, "tcp:0", 100, 0, 0}};
  const std::string text = merge_openmetrics("job7",
                                             {openmetrics_text("job7", {{0, "h1", false, &a}}, 0),
                                              openmetrics_text("job7", {{1, "h2", false, &b}}, 1)},
                                             1);
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("# TYPE sparkrun_rank_operations counter\n"), 1u) << text;
  EXPECT_EQ(count("# TYPE sparkrun_lane_bytes counter\n"), 1u) << text;
  EXPECT_EQ(count("sparkrun_job_failures_total"), 1u) << text;
  EXPECT_NE(text.find("sparkrun_job_failures_total{job=\"job7\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_operations_total{rank=\"0\",host=\"h1\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("sparkrun_rank_operations_total{rank=\"1\",host=\"h2\"} 3\n"),
            std::string::npos);
  EXPECT_NE(
      text.find("sparkrun_lane_bytes_total{rank=\"0\",host=\"h1\",peer=\"1\",lane=\"tcp:0\"} 100"),
      std::string::npos);
  EXPECT_EQ(count("# EOF"), 1u);
  EXPECT_EQ(text.substr(text.size() - 6), "# EOF\n");
}

TEST(Metrics, AddressIsPortOrIpv4AndPort) {
  const MetricsAddress a = parse_metrics_address("9400");
  EXPECT_EQ(a.ipv4, 0x7f000001u);
  EXPECT_EQ(a.port, 9400);
  const MetricsAddress b = parse_metrics_address("0.0.0.0:80");
  EXPECT_EQ(b.ipv4, 0u);
  EXPECT_EQ(b.port, 80);
  EXPECT_THROW(parse_metrics_address("host:80"), UsageError);
  EXPECT_THROW(parse_metrics_address("70000"), UsageError);
  EXPECT_THROW(parse_metrics_address("1.2.3.4:"), UsageError);
}

// Samples where ranks 0 and 1 block on `late(seq)` at every collective.
std::vector<std::string> watch(SlowRankWatch& w, int samples, int (*late)(std::uint64_t)) {
  std::vector<std::string> all;
  std::uint64_t seq = 10;
  for (int s = 0; s < samples; ++s) {
    std::vector<RankFlight::Op> a, b, c;
    for (int i = 0; i < 4; ++i, ++seq) {
      a.push_back(op(seq, 0, late(seq)));
      b.push_back(op(seq, 0, late(seq)));
      c.push_back(op(seq, 0));
    }
    for (auto& line : w.sample({rank(0, a), rank(1, b), rank(2, c)}, {{2, "h3"}}))
      all.push_back(line);
  }
  return all;
}

TEST(SlowRank, NamesTheRankAlwaysLateOnce) {
  SlowRankWatch w;
  const auto lines = watch(w, SlowRankWatch::kWindowSamples * 2, [](std::uint64_t) { return 2; });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(
      lines[0].rfind("warning: rank 2 (host h3) arrived last at 100% of 60 sampled collectives", 0),
      0u)
      << lines[0];
}

TEST(SlowRank, ARankOfAnotherHostIsNotNamed) {
  // One rank per host: this host reads rank 0 only, which waits on rank 1 at every collective
  // (the wire's latency; the other host's rank waits on rank 0 alike).
  SlowRankWatch w;
  std::vector<std::string> lines;
  std::uint64_t seq = 10;
  for (int s = 0; s < SlowRankWatch::kWindowSamples * 2; ++s) {
    std::vector<RankFlight::Op> a;
    for (int i = 0; i < 4; ++i, ++seq) a.push_back(op(seq, 0, 1));
    for (auto& line : w.sample({rank(0, a)}, {{1, "h2"}})) lines.push_back(line);
  }
  EXPECT_TRUE(lines.empty()) << lines.front();
}

TEST(SlowRank, RanksLateByTurnsAreNotNamed) {
  SlowRankWatch w;
  EXPECT_TRUE(watch(w, SlowRankWatch::kWindowSamples * 2, [](std::uint64_t s) {
                return static_cast<int>(s % 3);
              }).empty());
}

// Rank 0's two lanes to rank 1 over SlowLaneWatch::kWindowSamples + 1 readings 0.2 s apart:
// each carries 1 MB per reading and is busy `busy0` / `busy1` of each 0.2 s.
std::vector<std::string> lanes_watch(SlowLaneWatch& w, double busy0, double busy1) {
  std::vector<std::string> all;
  RankFlight f = rank(0, {});
  f.lanes = {{1, 0, "tcp:to1", 0, 0, 0}, {1, 1, "tcp:to1b", 0, 0, 0}, {2, 0, "tcp:to2", 0, 0, 0}};
  for (int s = 0; s <= 2 * SlowLaneWatch::kWindowSamples; ++s) {
    f.read_ns = std::int64_t{s} * 200'000'000;
    for (auto& l : f.lanes) l.bytes += 1'000'000;
    f.lanes[0].busy_ns += static_cast<std::uint64_t>(busy0 * 2e8);
    f.lanes[1].busy_ns += static_cast<std::uint64_t>(busy1 * 2e8);
    for (auto& line : w.sample({f}, {{0, "h1"}, {1, "h2"}})) all.push_back(line);
  }
  return all;
}

TEST(SlowLane, NamesTheLaneBusyWhileItsSiblingsFlowOnce) {
  SlowLaneWatch w;
  const auto lines = lanes_watch(w, 0.01, 0.9);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("warning: slow lane tcp:to1b of rank 0 (host h1) to rank 1 (host h2): "
                           "over the last 3 s it carried 15.0 MB in 2.70 s busy (90%), 5.6 MB/s",
                           0),
            0u)
      << lines[0];
  EXPECT_NE(
      lines[0].find("its sibling lanes to that peer tcp:to1 15.0 MB in 0.03 s busy, 500.0 MB/s"),
      std::string::npos)
      << lines[0];
}

TEST(SlowLane, LanesThatShareABottleneckAreNotNamed) {
  SlowLaneWatch even, slower;
  EXPECT_TRUE(lanes_watch(even, 0.9, 0.9).empty());    // a bottleneck both lanes share
  EXPECT_TRUE(lanes_watch(slower, 0.1, 0.6).empty());  // slower, not under a quarter
}

}  // namespace
}  // namespace spark::launch
