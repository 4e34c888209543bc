// The one-kernel small allreduce with its host proxy, on the host: the kernel body
// (small_allreduce.hpp, the code the GPU runs) executes in one thread per rank against plain
// memory laid out as the pinned channel, and the real Proxy moves the data through an
// in-process allgather with a deadline (the communicator's allgather in libspark).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/proxy.hpp"
#include "hub.hpp"
#include "spark/error.hpp"
#include "spark/kernels/host_clock.hpp"
#include "spark/kernels/small_allreduce.hpp"

namespace sk = spark::kernels;
using spark::DType;
using spark::ReduceOp;
using namespace std::chrono_literals;

namespace {

using spark::test::Hub;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct Rank {
  Rank(int rank, int size, std::size_t capacity, std::uint32_t timeout_ms, std::uint32_t grace_ms,
       Hub& hub) {
    const std::size_t total = sk::channel_layout(size, 1, capacity).total;
    mem.reset(std::aligned_alloc(4096, total));
    std::memset(mem.get(), 0, total);
    ch = sk::make_channel(mem.get(), rank, size, 1, capacity);
    sk::init_control_block(ch.ctl, rank, timeout_ms);
    ch.ctl->grace_ms = grace_ms;
    std::strcpy(ch.ctl->lane_names[0], "proxy");
    ch.ctl->lane_count = 1;
    proxy = std::make_unique<spark::cuda::Proxy>(
        ch,
        [&hub, rank](const void* in, void* out, std::size_t bytes) {
          hub.exchange(rank, in, out, bytes);
        },
        [this](const sk::FailureRecordData& r) {
          reported_peer = r.peer;
          reported.store(reported.load() + 1);
        });
  }
  template <class T>
  sk::KernelStatus run(const T* send, T* recv, std::size_t count, DType dtype, ReduceOp op) {
    sk::HostExec ex;
    sk::SteadyClock clock;
    return sk::small_allreduce_body<T>(ch, send, recv, count, dtype, op, ex, clock);
  }
  std::atomic<int> reported{0};  // on_failure calls (exactly one after a failure)
  std::atomic<int> reported_peer{-2};
  std::unique_ptr<void, FreeDeleter> mem;
  sk::Channel ch;
  std::unique_ptr<spark::cuda::Proxy> proxy;
};

/// Deterministic inputs that exercise every type (small values so products stay finite).
template <class T>
T value(int rank, std::size_t i, int round) {
  const std::uint32_t x = static_cast<std::uint32_t>(rank * 7919 + i * 104729 + round * 31) % 1009;
  const float f = (static_cast<float>(x) - 504.0f) / 97.0f;
  if constexpr (std::is_same_v<T, sk::Half>)
    return sk::float_to_half(f);
  else if constexpr (std::is_same_v<T, sk::BFloat16>)
    return sk::float_to_bf16(f);
  else if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(f);
  else
    return static_cast<T>(static_cast<int>(x) - 504);
}

template <class T>
void run_all_ops(int size) {
  constexpr std::size_t kCount = 301;
  Hub hub(size, 60s);
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.push_back(std::make_unique<Rank>(r, size, kCount * sizeof(T), 60000, 1000, hub));
  }
  const DType dtype = [] {
    if constexpr (std::is_same_v<T, float>)
      return DType::f32;
    else if constexpr (std::is_same_v<T, double>)
      return DType::f64;
    else if constexpr (std::is_same_v<T, sk::Half>)
      return DType::f16;
    else if constexpr (std::is_same_v<T, sk::BFloat16>)
      return DType::bf16;
    else if constexpr (std::is_same_v<T, std::int32_t>)
      return DType::i32;
    else if constexpr (std::is_same_v<T, std::int64_t>)
      return DType::i64;
    else
      return DType::u8;
  }();
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                          ReduceOp::avg};
  std::vector<std::vector<std::vector<T>>> in(size), out(size);  // [rank][round]
  for (int r = 0; r < size; ++r) {
    for (int k = 0; k < 5; ++k) {
      in[r].emplace_back(kCount);
      out[r].emplace_back(kCount);
      for (std::size_t i = 0; i < kCount; ++i) in[r][k][i] = value<T>(r, i, k);
    }
  }
  std::vector<std::thread> threads;
  std::vector<int> failures(size, 0);
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      for (int k = 0; k < 5; ++k) {
        if (ranks[r]->run<T>(in[r][k].data(), out[r][k].data(), kCount, dtype, ops[k]) !=
            sk::KernelStatus::done) {
          ++failures[r];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(failures[r], 0) << "rank " << r;
    EXPECT_EQ(ranks[r]->proxy->served(), size > 1 ? 5u : 0u);  // alone: no proxy work
    EXPECT_EQ(ranks[r]->ch.ctl->device_seq, 5u);
  }
  for (int k = 0; k < 5; ++k) {
    std::vector<const T*> ptrs;
    for (int r = 0; r < size; ++r) ptrs.push_back(in[r][k].data());
    std::vector<T> want(kCount);
    sk::reduce_reference_typed<T>(ops[k], ptrs.data(), size, want.data(), kCount);
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(std::memcmp(out[r][k].data(), want.data(), kCount * sizeof(T)), 0)
          << "rank " << r << " of " << size << ", op " << spark::to_string(ops[k]);
    }
  }
}

template <class T>
class SmallAllreduceHost : public ::testing::Test {};
using Types = ::testing::Types<float, double, sk::Half, sk::BFloat16, std::int32_t, std::int64_t,
                               std::uint8_t>;
TYPED_TEST_SUITE(SmallAllreduceHost, Types);

TYPED_TEST(SmallAllreduceHost, EveryOpMatchesReferenceBitForBit) {
  for (int size : {1, 2, 3, 4}) {
    SCOPED_TRACE(size);
    run_all_ops<TypeParam>(size);
  }
}

TEST(SmallAllreduceHostFault, InPlace) {
  Hub hub(2, 60s);
  Rank a(0, 2, 1024, 60000, 1000, hub), b(1, 2, 1024, 60000, 1000, hub);
  std::vector<float> x = {1, 2, 3}, y = {10, 20, 30};
  std::thread t([&] {
    EXPECT_EQ(b.run<float>(y.data(), y.data(), 3, DType::f32, ReduceOp::sum),
              sk::KernelStatus::done);
  });
  EXPECT_EQ(a.run<float>(x.data(), x.data(), 3, DType::f32, ReduceOp::sum), sk::KernelStatus::done);
  t.join();
  EXPECT_EQ(x, (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(y, x);
}

// A peer that never launches its kernel: the proxy's exchange names it, the kernels of the
// others stop (on a GPU: trap) and the record is the communicator's, with the device seq.
TEST(SmallAllreduceHostFault, PeerNeverArrivesProxyRecordsIt) {
  Hub hub(3, 60s);
  Rank r0(0, 3, 1024, 300, 20000, hub), r1(1, 3, 1024, 300, 20000, hub),
      r2(2, 3, 1024, 300, 20000, hub);
  // One output per rank: ranks run at the same time (one buffer would be a data race).
  std::vector<float> x(8, 1.0f);
  std::vector<std::vector<float>> y(3, std::vector<float>(8));
  // One good round first, so the failing one is seq 2. Deadlines are long until ranks 0 and 1
  // are both in seq 2's exchange: the 300 ms are for rank 2's absence, not for scheduling (on
  // 2 busy cores under ThreadSanitizer, the ranks' threads got there up to 240 ms apart).
  {
    std::vector<std::thread> ts;
    for (Rank* r : {&r1, &r2})
      ts.emplace_back([&, r] {
        r->run<float>(x.data(), y[static_cast<std::size_t>(r->ch.rank)].data(), 8, DType::f32,
                      ReduceOp::sum);
      });
    ASSERT_EQ(r0.run<float>(x.data(), y[0].data(), 8, DType::f32, ReduceOp::sum),
              sk::KernelStatus::done);
    for (auto& t : ts) t.join();
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::thread shorten([&] {
    for (int i = 0; i < 5000 && hub.arrived(2) < 2; ++i) std::this_thread::sleep_for(2ms);
    hub.set_timeout(300ms);
  });
  std::thread t1([&] {
    EXPECT_EQ(r1.run<float>(x.data(), y[1].data(), 8, DType::f32, ReduceOp::sum),
              sk::KernelStatus::failed);
  });
  EXPECT_EQ(r0.run<float>(x.data(), y[0].data(), 8, DType::f32, ReduceOp::sum),
            sk::KernelStatus::failed);
  t1.join();
  shorten.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);  // well before the 20 s grace
  for (Rank* r : {&r0, &r1}) {
    // The kernel stops as soon as the proxy has claimed the record (state writing): read it
    // as the product does, once published, not while the proxy thread still fills it.
    const sk::FailureRecordData* published = sk::published_record(r->ch.ctl);
    ASSERT_NE(published, nullptr);
    spark::FailureRecord rec;
    std::memcpy(static_cast<void*>(&rec), published, sizeof rec);
    EXPECT_EQ(rec.rank, r->ch.rank);
    EXPECT_EQ(rec.peer, 2);
    EXPECT_EQ(rec.seq, 2u);
    EXPECT_EQ(rec.cause, spark::FailureCause::timeout);
    EXPECT_STREQ(rec.lane, "hub");
    EXPECT_STREQ(rec.op, "allreduce");
    EXPECT_EQ(spark::to_string(rec),
              "rank " + std::to_string(r->ch.rank) +
                  ": allreduce seq 2 step 0: no data from rank 2 on lane hub after 300 ms "
                  "(timeout 300 ms) [gpu op, host proxy]");
  }
  for (Rank* r : {&r0, &r1}) {
    for (int i = 0; i < 2000 && r->reported.load() == 0; ++i) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(r->reported.load(), 1);
    EXPECT_EQ(r->reported_peer, 2);
  }
  EXPECT_EQ(r2.reported.load(), 0);
  // Failed means failed: the next call stops at once, without staging.
  const std::uint64_t staged = *r0.ch.stage_flag;
  EXPECT_EQ(r0.run<float>(x.data(), y[0].data(), 8, DType::f32, ReduceOp::sum),
            sk::KernelStatus::failed);
  EXPECT_EQ(*r0.ch.stage_flag, staged);
  hub.cancel();
}

// The proxy is stuck (its exchange never returns): the kernel's own wait is the backstop, and
// a timeout set after the "launch" (as after graph capture) is the one that counts.
TEST(SmallAllreduceHostFault, KernelWaitIsBackstopAndSeesNewTimeout) {
  Hub hub(2, 600s);
  Rank r0(0, 2, 1024, 600000, 0, hub), r1(1, 2, 1024, 600000, 0, hub);
  std::vector<float> x(8, 1.0f), y(8);
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    sk::set_timeout_ms(r0.ch.ctl, 100);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(r0.run<float>(x.data(), y.data(), 8, DType::f32, ReduceOp::sum),
            sk::KernelStatus::failed);
  const auto took = std::chrono::steady_clock::now() - t0;
  setter.join();
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 60s);
  const sk::FailureRecordData& rec = r0.ch.ctl->record;
  EXPECT_EQ(rec.peer, 1);
  EXPECT_EQ(rec.seq, 1u);
  EXPECT_EQ(rec.timeout_ms, 100u);
  EXPECT_GE(rec.waited_ms, 100u);
  EXPECT_STREQ(rec.lane, "proxy");
  EXPECT_STREQ(rec.detail, "gpu wait");
  hub.cancel();  // frees the proxy thread; its own failure does not overwrite the record
  r0.proxy.reset();
  EXPECT_EQ(r0.reported.load(), 1);  // the kernel's record, reported by the proxy thread
  EXPECT_EQ(r0.reported_peer, 1);
  EXPECT_EQ(r0.ch.ctl->record.peer, 1);
  EXPECT_STREQ(r0.ch.ctl->record.detail, "gpu wait");
}

TEST(SmallAllreduceHostFault, OversizedCallIsRefusedByProxy) {
  Hub hub(1, 1s);
  Rank r0(0, 1, 16, 1000, 0, hub);
  // Bypass the launcher's size check: the proxy must still refuse rather than overflow.
  r0.ch.desc->count = 1000;
  r0.ch.desc->dtype = static_cast<std::uint32_t>(DType::f32);
  sk::store_release(r0.ch.stage_flag, 1);
  for (int i = 0; i < 2000 && !sk::is_failed(r0.ch.ctl); ++i) std::this_thread::sleep_for(5ms);
  const sk::FailureRecordData* rec = sk::published_record(r0.ch.ctl);  // the proxy writes it
  ASSERT_NE(rec, nullptr);
  EXPECT_EQ(rec->cause, sk::kCausePeerError);
  EXPECT_NE(std::string(rec->detail).find("exceeds the channel capacity"), std::string::npos);
}

}  // namespace
