// Waking a sleeping shm peer (docs/memory-ordering.md, "shm mailbox"): with light fences
// (SPARK_SHM_MEMBARRIER=on, both ends registered) the sender publishes without a fence and
// the sleeper pays a membarrier; without them both sides fence. Either way a rank asleep on
// a message or a free slot must wake when it comes, not at the end of its sleep: two
// transports of this process, a thread each, every wait blocking with a 2 s slice (a lost
// wake-up costs about a slice: one fails the test, the third ends it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "transport/shm/heavy_fence.hpp"
#include "transport/shm/shm_transport.hpp"

namespace spark::transport {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr auto kSlice = std::chrono::seconds(2);
constexpr int kMostLate = 3;
// Far above a wake-up (tens of us here, ms under load), half the slice.
constexpr auto kLate = milliseconds(1000);

struct WakePair {
  ShmTransport t0, t1;
  WakePair(bool membarrier0, bool membarrier1)
      : t0(0, 2, {0, 1}, "shmwake" + std::to_string(::getpid()), "node",
           ShmOptions{2, 4096, false, membarrier0}),
        t1(1, 2, {0, 1}, "shmwake" + std::to_string(::getpid()), "node",
           ShmOptions{2, 4096, false, membarrier1}) {
    t0.attach(1, t1.endpoint());
    t1.attach(0, t0.endpoint());
    t0.connected();  // unlinks the names: a test killed midway leaves nothing in /dev/shm
    t1.connected();
  }
};

MsgHeader header(std::uint64_t seq) {
  MsgHeader h;
  h.seq = seq;
  h.bytes = 8;
  return h;
}

TEST(ShmWakeUp, BothEndsAgreeOnLightFences) {
  if (!register_light_fences()) GTEST_SKIP() << "membarrier refused here: no light fences";
  WakePair both(true, true);
  EXPECT_TRUE(both.t0.light_fences(1));
  EXPECT_TRUE(both.t1.light_fences(0));
  WakePair one(true, false);  // SPARK_SHM_MEMBARRIER=off on rank 1 alone
  EXPECT_FALSE(one.t0.light_fences(1));
  EXPECT_FALSE(one.t1.light_fences(0));
}

class ShmWakeUpMode : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !register_light_fences())
      GTEST_SKIP() << "membarrier refused here: the light case would run with full fences";
  }
};

// Rank 1 sleeps on rank 0's next message; rank 0 sends it 0-300 us later. Every sleep must
// end at the message (the wait ends within kLate of the send), 300 times.
TEST_P(ShmWakeUpMode, ASleepingReceiverWakesAtTheMessage) {
  WakePair p(GetParam(), GetParam());
  constexpr int kRounds = 300;
  std::atomic<std::int64_t> sent_at[kRounds] = {};
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    std::mt19937 rng(7);
    for (int i = 0; i < kRounds && !stop; ++i) {
      std::this_thread::sleep_for(microseconds(rng() % 300));
      while (!p.t0.can_send(1) && !stop) p.t0.block(1, WaitKind::credit, kSlice);
      if (stop) break;
      const std::uint64_t payload = static_cast<std::uint64_t>(i);
      sent_at[i].store(Clock::now().time_since_epoch().count());
      p.t0.send(1, header(static_cast<std::uint64_t>(i)), &payload);
    }
  });
  int late = 0;
  Clock::duration worst{};
  for (int i = 0; i < kRounds && late < kMostLate; ++i) {
    RecvView v;
    while ((v = p.t1.peek(0)).header == nullptr) p.t1.block(0, WaitKind::data, kSlice);
    const auto now = Clock::now();
    const auto took = now - Clock::time_point(Clock::duration(sent_at[i].load()));
    worst = std::max(worst, took);
    if (took > kLate) ++late;
    EXPECT_EQ(v.header->seq, static_cast<std::uint64_t>(i));
    p.t1.release(0);
  }
  stop = true;
  sender.join();
  EXPECT_EQ(late, 0) << "worst wake-up " << std::chrono::duration_cast<microseconds>(worst).count()
                     << " us";
}

// Rank 0 fills both slots and sleeps on a credit; rank 1 frees one 0-300 us later.
TEST_P(ShmWakeUpMode, ASleepingSenderWakesAtTheCredit) {
  WakePair p(GetParam(), GetParam());
  constexpr int kRounds = 300;
  std::atomic<std::int64_t> released_at{0};
  std::atomic<int> received{0};
  std::atomic<bool> stop{false};
  std::thread receiver([&] {
    std::mt19937 rng(11);
    for (int i = 0; i < kRounds + 2 && !stop; ++i) {
      RecvView v;
      while ((v = p.t1.peek(0)).header == nullptr && !stop) p.t1.block(0, WaitKind::data, kSlice);
      if (stop) break;
      // Only once the sender is out of credits (2 slots in flight) is it asleep on one.
      if (i >= 2) std::this_thread::sleep_for(microseconds(rng() % 300));
      released_at.store(Clock::now().time_since_epoch().count());
      p.t1.release(0);
      received.fetch_add(1);
    }
  });
  const std::uint64_t payload = 0;
  int late = 0;
  for (int i = 0; i < kRounds + 2 && late < kMostLate; ++i) {
    while (!p.t0.can_send(1) && late < kMostLate) {
      p.t0.block(1, WaitKind::credit, kSlice);
      if (p.t0.can_send(1)) {
        const auto took = Clock::now() - Clock::time_point(Clock::duration(released_at.load()));
        if (took > kLate) ++late;
      }
    }
    if (late >= kMostLate) break;
    p.t0.send(1, header(static_cast<std::uint64_t>(i)), &payload);
  }
  stop = late >= kMostLate;  // else the receiver ends by itself, after the last message
  receiver.join();
  EXPECT_EQ(late, 0);
  if (late == 0) {
    EXPECT_EQ(received.load(), kRounds + 2);
  }
}

// A long wait in short slices (a late peer): after a slice slept through, the next one fences
// before it sleeps; the message must still wake it (2 ms slices, messages 5-10 ms late): the
// sender's wake-up, not the end of a slice, ends the wait (the transport's measure of a real
// wake-up, take_wake_latency, reports it), in most rounds.
TEST_P(ShmWakeUpMode, ALongWaitInShortSlicesWakesAtTheMessage) {
  WakePair p(GetParam(), GetParam());
  constexpr int kRounds = 20;
  std::atomic<std::int64_t> sent_at{0};
  std::thread sender([&] {
    std::mt19937 rng(5);
    const std::uint64_t payload = 0;
    for (int i = 0; i < kRounds; ++i) {
      std::this_thread::sleep_for(microseconds(5000 + rng() % 5000));
      while (!p.t0.can_send(1)) p.t0.block(1, WaitKind::credit, kSlice);
      sent_at.store(Clock::now().time_since_epoch().count());
      p.t0.send(1, header(static_cast<std::uint64_t>(i)), &payload);
    }
  });
  int woken = 0;
  for (int i = 0; i < kRounds; ++i) {
    RecvView v;
    bool was_woken = false;
    for (int slices = 0; (v = p.t1.peek(0)).header == nullptr && slices < 5000; ++slices) {
      p.t1.block(0, WaitKind::data, milliseconds(2));
      was_woken = p.t1.take_wake_latency().has_value() || was_woken;
    }
    ASSERT_NE(v.header, nullptr);
    woken += was_woken ? 1 : 0;
    p.t1.release(0);
  }
  sender.join();
  EXPECT_GE(woken, kRounds / 2);
}

INSTANTIATE_TEST_SUITE_P(Fences, ShmWakeUpMode, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Light" : "Full"; });

}  // namespace
}  // namespace spark::transport
