// Communicator::set_timeout_ms reaches the control block that DeviceComm registers, on the host
// (issue 44; before, only a GPU test checked that link). The block is filled and registered by
// ControlBlockLink, the code DeviceComm's constructor runs (libspark/src/cuda/control_link.hpp),
// here in ordinary memory instead of pinned mapped memory; the timeout is set through the public
// spark::Communicator; and the wait the kernels run (kernels/include/spark/kernels/wait.hpp,
// compiled for the host) on that block expires by the new timeout, also when it is set while
// the wait runs: a kernel replayed from a captured graph learns a new timeout no other way.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bootstrap/bootstrap.hpp"
#include "comm/communicator_impl.hpp"
#include "cuda/control_link.hpp"
#include "spark/communicator.hpp"
#include "spark/config/config.hpp"
#include "spark/kernels/channel.hpp"
#include "spark/kernels/wait.hpp"

namespace sk = spark::kernels;

namespace {

constexpr std::uint64_t kMs = 1000000;
constexpr std::uint32_t kStartTimeoutMs = 60000;

/// A communicator of one rank (singleton bootstrap, no setenv) with the given timeout.
spark::Communicator one_rank(std::uint32_t timeout_ms) {
  const auto config = spark::config::Config::from_map(
      {{"SPARK_BOOTSTRAP", "singleton"}, {"SPARKNET_ROCE_TIMEOUT_MS", std::to_string(timeout_ms)}});
  return spark::Communicator(std::make_unique<spark::CommunicatorImpl>(
      spark::bootstrap::make_singleton_bootstrap(config), spark::CommOptions::from_config(config)));
}

/// A device channel's memory as DeviceComm lays it out, in ordinary memory.
struct HostChannel {
  explicit HostChannel(std::size_t capacity = 4096) {
    const std::size_t total = sk::channel_layout(1, 1, capacity).total;
    mem.reset(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
    std::memset(mem.get(), 0xee, total);  // not zero: the link must fill every field it uses
    ch = sk::make_channel(mem.get(), 0, 1, 1, capacity);
  }
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> mem;
  sk::Channel ch;
};

/// Every now_ns() is 1 ms later; `at_ms` runs `event` once the wait has reached that time.
struct ScriptedClock {
  std::uint64_t t = 7 * kMs;
  std::uint64_t at_ms = 0;
  std::function<void()> event;
  std::uint64_t now_ns() {
    t += kMs;
    if (event && t >= at_ms * kMs) std::exchange(event, nullptr)();
    return t;
  }
  std::int64_t unix_ns() const { return 1764460800LL * 1000000000LL; }
  void relax() {}
};

/// A wait on a flag that never comes, as a kernel's wait on a stopped peer.
struct NeverArrives {
  std::uint64_t flag = 0;
  sk::FlagWait w{
      &flag,
      sk::FailureSite{
          .peer = 0, .lane = 0, .seq = 1, .step = 0, .op = "allreduce", .detail = "device wait"}};
};

TEST(TimeoutLink, RegistrationFillsTheBlockFromTheCommunicator) {
  spark::Communicator comm = one_rank(kStartTimeoutMs);
  HostChannel hc;
  spark::cuda::ControlBlockLink link(spark::internal::impl(comm), hc.ch.ctl);
  EXPECT_EQ(hc.ch.ctl->timeout_ms, kStartTimeoutMs);
  EXPECT_EQ(hc.ch.ctl->grace_ms, spark::cuda::kDeviceGraceMs);
  EXPECT_EQ(hc.ch.ctl->rank, 0);
  EXPECT_EQ(hc.ch.ctl->state, sk::kStateHealthy);
  EXPECT_EQ(hc.ch.ctl->lane_count, 1u);
  EXPECT_STREQ(hc.ch.ctl->lane_names[0], "host-proxy");
}

TEST(TimeoutLink, SetTimeoutWritesTheRegisteredBlock) {
  spark::Communicator comm = one_rank(kStartTimeoutMs);
  HostChannel a, b;  // two DeviceComms on one communicator
  {
    spark::cuda::ControlBlockLink la(spark::internal::impl(comm), a.ch.ctl);
    spark::cuda::ControlBlockLink lb(spark::internal::impl(comm), b.ch.ctl);
    comm.set_timeout_ms(40);
    EXPECT_EQ(a.ch.ctl->timeout_ms, 40u);
    EXPECT_EQ(b.ch.ctl->timeout_ms, 40u);
    EXPECT_EQ(comm.timeout_ms(), 40u);
  }
  // Unregistered with the DeviceComm: later calls leave the (freed, in DeviceComm) block alone.
  comm.set_timeout_ms(77);
  EXPECT_EQ(a.ch.ctl->timeout_ms, 40u);
  EXPECT_EQ(b.ch.ctl->timeout_ms, 40u);
}

// What a captured graph's replay sees: the kernel's wait began with the old timeout (60 s) and
// the caller lowers it while the wait runs; the wait expires by the new one (plus the grace the
// proxy gets) and its record names it.
TEST(TimeoutLink, SetTimeoutDuringTheDeviceWaitTakesEffect) {
  spark::Communicator comm = one_rank(kStartTimeoutMs);
  HostChannel hc;
  spark::cuda::ControlBlockLink link(spark::internal::impl(comm), hc.ch.ctl);
  NeverArrives n;
  ScriptedClock clock;
  clock.at_ms = clock.t / kMs + 10;  // 10 ms into the wait
  clock.event = [&comm] { comm.set_timeout_ms(40); };
  EXPECT_EQ(sk::wait_flag(hc.ch.ctl, n.w, clock), sk::WaitStatus::timed_out);
  EXPECT_FALSE(clock.event) << "the timeout was never changed";
  const sk::FailureRecordData* r = sk::published_record(hc.ch.ctl);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->timeout_ms, 40u);
  const std::uint32_t limit = 40 + spark::cuda::kDeviceGraceMs;
  EXPECT_GE(r->waited_ms, limit);
  EXPECT_LE(r->waited_ms, limit + 2) << "the wait kept the timeout it began with";
  EXPECT_STREQ(r->lane, "host-proxy");
}

}  // namespace
