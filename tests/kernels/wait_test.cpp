// Host tests of the device-side wait (kernels/include/spark/kernels/wait.hpp): the same code
// the GPU runs, driven by a scripted clock so that every case is exact and load-independent.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "spark/failure.hpp"
#include "spark/kernels/control_block.hpp"
#include "spark/kernels/host_clock.hpp"
#include "spark/kernels/wait.hpp"

namespace sk = spark::kernels;

static_assert(static_cast<int>(spark::FailureCause::timeout) == sk::kCauseTimeout);
static_assert(static_cast<int>(spark::FailureCause::mismatch) == sk::kCauseMismatch);

namespace {

constexpr std::uint64_t kMs = 1000000;

/// Every now_ns() advances time by `tick`; `at(t, f)` runs f the first time now >= t.
struct ScriptedClock {
  std::uint64_t t = 5 * kMs;  // not zero: a wait must measure from its own start
  std::uint64_t tick = kMs;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> events;
  std::uint64_t calls = 0;
  std::uint64_t relaxes = 0;

  void at(std::uint64_t when, std::function<void()> f) { events.emplace_back(when, std::move(f)); }
  std::uint64_t now_ns() {
    ++calls;
    t += tick;
    for (auto& [when, f] : events) {
      if (f && t >= when) {
        auto g = std::move(f);
        f = nullptr;
        g();
      }
    }
    return t;
  }
  std::int64_t unix_ns() const { return 1764460800LL * 1000000000LL + 7; }
  void relax() { ++relaxes; }
};

struct Fixture : ::testing::Test {
  sk::ControlBlock ctl{};
  std::uint64_t flag = 0;
  sk::FlagWait w;
  void SetUp() override {
    sk::init_control_block(&ctl, 3, 100);
    std::strcpy(ctl.lane_names[0], "tcp:0");
    std::strcpy(ctl.lane_names[1], "rocep1s0f0");
    ctl.lane_count = 2;
    w.flag = &flag;
    w.site = sk::FailureSite{.peer = 2,
                             .lane = 1,
                             .seq = 42,
                             .step = 1,
                             .op = "allreduce",
                             .detail = "gpu wait on peer flag"};
  }
};

using WaitTest = Fixture;

TEST_F(WaitTest, FlagAlreadySetReturnsAtOnce) {
  flag = 42;
  ScriptedClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::arrived);
  EXPECT_EQ(ctl.state, sk::kStateHealthy);
}

TEST_F(WaitTest, OlderSequenceDoesNotCount) {
  flag = 41;  // the previous operation's flag must not satisfy this one
  ScriptedClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
}

TEST_F(WaitTest, DeadlineReachedWritesRecordAndFails) {
  ScriptedClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(ctl.state, sk::kStateFailed);
  // 1 ms ticks from the start: expiry is the first sample at >= 100 ms.
  EXPECT_EQ(ctl.record.waited_ms, 100u);
  EXPECT_EQ(ctl.record.timeout_ms, 100u);
  EXPECT_GE(clock.relaxes, 90u);  // it polled (and relaxed) in between
}

TEST_F(WaitTest, RecordContents) {
  ScriptedClock clock;
  ASSERT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  const sk::FailureRecordData& r = ctl.record;
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.peer, 2);
  EXPECT_EQ(r.seq, 42u);
  EXPECT_EQ(r.step, 1u);
  EXPECT_EQ(r.cause, sk::kCauseTimeout);
  EXPECT_EQ(r.time_unix_ns, clock.unix_ns());
  EXPECT_STREQ(r.lane, "rocep1s0f0");
  EXPECT_STREQ(r.op, "allreduce");
  EXPECT_STREQ(r.detail, "gpu wait on peer flag");

  // Readable as libspark's record, byte for byte.
  spark::FailureRecord rec;
  std::memcpy(static_cast<void*>(&rec), &r, sizeof rec);
  EXPECT_EQ(rec.peer, 2);
  EXPECT_EQ(rec.cause, spark::FailureCause::timeout);
  EXPECT_STREQ(rec.lane, "rocep1s0f0");
}

TEST_F(WaitTest, UnnamedLaneGetsNumber) {
  w.site.lane = 3;
  ScriptedClock clock;
  ASSERT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_STREQ(ctl.record.lane, "lane 3");
  w.site.lane = 1234567;
  ctl.state = sk::kStateHealthy;
  ASSERT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_STREQ(ctl.record.lane, "lane 1234567");
}

TEST_F(WaitTest, FlagArrivesJustInTime) {
  ScriptedClock clock;
  // The flag is written while the clock reads the deadline sample: the last look takes it.
  clock.at(5 * kMs + 101 * kMs, [&] { flag = 42; });
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::arrived);
  EXPECT_EQ(ctl.state, sk::kStateHealthy);
}

TEST_F(WaitTest, FlagOneTickLateFails) {
  ScriptedClock clock;
  clock.at(5 * kMs + 102 * kMs, [&] { flag = 42; });
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(ctl.record.waited_ms, 100u);
}

TEST_F(WaitTest, TimeoutRaisedMidWait) {
  ScriptedClock clock;
  clock.at(5 * kMs + 50 * kMs, [&] { sk::set_timeout_ms(&ctl, 300); });
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(ctl.record.waited_ms, 300u);
  EXPECT_EQ(ctl.record.timeout_ms, 300u);
}

TEST_F(WaitTest, TimeoutLoweredMidWaitExpiresAtOnce) {
  sk::set_timeout_ms(&ctl, 10000);
  ScriptedClock clock;
  clock.at(5 * kMs + 50 * kMs, [&] { sk::set_timeout_ms(&ctl, 20); });
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(ctl.record.waited_ms, 50u);  // already past the new deadline when it was set
  EXPECT_EQ(ctl.record.timeout_ms, 20u);
}

TEST_F(WaitTest, GraceExtendsDeadlineButRecordShowsTimeout) {
  ctl.grace_ms = 50;
  ScriptedClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(ctl.record.waited_ms, 150u);
  EXPECT_EQ(ctl.record.timeout_ms, 100u);
}

TEST_F(WaitTest, AlreadyFailedCommunicatorFailsAtOnce) {
  sk::FailureSite other{.peer = 1, .lane = 0, .seq = 7, .step = 0, .op = "broadcast", .detail = ""};
  ASSERT_TRUE(sk::record_failure(&ctl, other, sk::kCausePeerClosed, 0, 100, 1));
  flag = 0;
  ScriptedClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::failed);
  EXPECT_LE(clock.calls, 1u);
  // Even with the data there: nothing continues after a failure.
  flag = 42;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::failed);
  // The first record stands.
  EXPECT_EQ(ctl.record.peer, 1);
  EXPECT_EQ(ctl.record.cause, sk::kCausePeerClosed);
  EXPECT_STREQ(ctl.record.op, "broadcast");
}

TEST_F(WaitTest, FailureElsewhereStopsRunningWait) {
  ScriptedClock clock;
  clock.at(5 * kMs + 30 * kMs, [&] {
    sk::record_failure(&ctl, sk::FailureSite{.peer = 0, .op = "allreduce"}, sk::kCauseRemoteAbort,
                       0, 100, 1);
  });
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::failed);
  EXPECT_EQ(ctl.record.peer, 0);
  EXPECT_EQ(ctl.record.cause, sk::kCauseRemoteAbort);
}

TEST_F(WaitTest, OnlyFirstWriterRecords) {
  EXPECT_TRUE(sk::record_failure(&ctl, sk::FailureSite{.peer = 1}, sk::kCauseTimeout, 5, 5, 1));
  EXPECT_FALSE(sk::record_failure(&ctl, sk::FailureSite{.peer = 2}, sk::kCauseTimeout, 6, 6, 2));
  EXPECT_EQ(ctl.record.peer, 1);
  EXPECT_EQ(ctl.record.waited_ms, 5u);
}

TEST_F(WaitTest, LongStringsAreTruncated) {
  std::string longop(100, 'x');
  w.site.op = longop.c_str();
  ScriptedClock clock;
  ASSERT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  EXPECT_EQ(std::strlen(ctl.record.op), sizeof(ctl.record.op) - 1);
}

// The real host clock and a real second thread (what the host proxy does). Bounds are loose:
// the machine is shared and loaded.
TEST_F(WaitTest, RealClockOtherThreadSetsFlag) {
  sk::set_timeout_ms(&ctl, 20000);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    __atomic_store_n(&flag, 42, __ATOMIC_RELEASE);
  });
  sk::SteadyClock clock;
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::arrived);
  writer.join();
}

TEST_F(WaitTest, RealClockExpires) {
  sk::set_timeout_ms(&ctl, 50);
  sk::SteadyClock clock;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(sk::wait_flag(&ctl, w, clock), sk::WaitStatus::timed_out);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(50));
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_GE(ctl.record.waited_ms, 50u);
  EXPECT_GT(ctl.record.time_unix_ns, 0);
}

}  // namespace
