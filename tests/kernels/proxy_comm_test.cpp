// The host proxy over the real communicator (forked ranks, env rendezvous, tcp and shm): the
// one-kernel allreduce body runs on the host in each rank, its proxy moves the staged bytes
// with the communicator's allgather. No GPU needed; this is the device path minus the GPU.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "../libspark/multiproc.hpp"
#include "cuda/proxy.hpp"
#include "spark/kernels/host_clock.hpp"
#include "spark/kernels/small_allreduce.hpp"

namespace sk = spark::kernels;
using spark::DType;
using spark::ReduceOp;

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct HostChannel {
  HostChannel(int rank, int size, std::size_t capacity, std::uint32_t timeout_ms,
              std::uint32_t grace_ms) {
    const std::size_t total = sk::channel_layout(size, 1, capacity).total;
    mem.reset(std::aligned_alloc(4096, total));
    std::memset(mem.get(), 0, total);
    ch = sk::make_channel(mem.get(), rank, size, 1, capacity);
    sk::init_control_block(ch.ctl, rank, timeout_ms);
    ch.ctl->grace_ms = grace_ms;
  }
  std::unique_ptr<void, FreeDeleter> mem;
  sk::Channel ch;
};

spark::cuda::Proxy::Exchange over(spark::CommunicatorImpl& comm) {
  return [&comm](const void* in, void* out, std::size_t bytes) {
    comm.allgather(in, out, bytes, DType::u8);
  };
}

float input(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + i % 97);
}

class ProxyOverComm : public ::testing::TestWithParam<std::string> {};

TEST_P(ProxyOverComm, ThreeRanksAllreduce) {
  spark::test::RankSpec spec;
  spec.size = 3;
  spec.transport = GetParam();
  const auto codes = spark::test::run_ranks(spec, [](spark::CommunicatorImpl& comm, int rank) {
    constexpr std::size_t kCount = 5000;
    HostChannel hc(rank, 3, kCount * 8, 20000, 2000);
    spark::cuda::Proxy proxy(hc.ch, over(comm));
    std::vector<float> in(kCount), out(kCount);
    for (std::size_t i = 0; i < kCount; ++i) in[i] = input(rank, i);
    sk::HostExec ex;
    sk::SteadyClock clock;
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
      if (sk::small_allreduce_body<float>(hc.ch, in.data(), out.data(), kCount, DType::f32, op, ex,
                                          clock) != sk::KernelStatus::done) {
        const sk::FailureRecordData* r = sk::published_record(hc.ch.ctl);  // the proxy's
        std::fprintf(stderr, "rank %d: failed: %s\n", rank, r != nullptr ? r->detail : "?");
        return 1;
      }
      for (std::size_t i = 0; i < kCount; ++i) {
        const float a = input(0, i), b = input(1, i), c = input(2, i);
        const float want = op == ReduceOp::sum   ? (a + b) + c
                           : op == ReduceOp::max ? c
                                                 : ((a + b) + c) / 3.0f;
        if (out[i] != want) {
          std::fprintf(stderr, "rank %d: element %zu: %g, want %g\n", rank, i, out[i], want);
          return 2;
        }
      }
    }
    return proxy.served() == 3 ? 0 : 3;
  });
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0}));
}

// Rank 2 stops (SIGSTOP) instead of calling: the others' proxies get the communicator's
// record, their kernel bodies stop (a GPU would trap), and at least one names rank 2.
TEST_P(ProxyOverComm, StoppedRankIsNamed) {
  spark::test::RankSpec spec;
  spec.size = 3;
  spec.transport = GetParam();
  spec.timeout_ms = 600;
  spec.quick_exit = true;
  spec.stopped_ranks = {2};
  const auto codes = spark::test::run_ranks(
      spec,
      [](spark::CommunicatorImpl& comm, int rank) {
        HostChannel hc(rank, 3, 4096, 600, 10000);
        spark::cuda::Proxy proxy(hc.ch, over(comm));
        std::vector<float> buf(64, 1.0f);
        sk::HostExec ex;
        sk::SteadyClock clock;
        if (rank == 2) raise(SIGSTOP);
        if (sk::small_allreduce_body<float>(hc.ch, buf.data(), buf.data(), 64, DType::f32,
                                            ReduceOp::sum, ex, clock) != sk::KernelStatus::failed) {
          return 1;
        }
        const sk::FailureRecordData& r = *sk::published_record(hc.ch.ctl);
        spark::FailureRecord rec;
        std::memcpy(static_cast<void*>(&rec), &r, sizeof rec);
        std::fprintf(stderr, "rank %d: %s\n", rank, spark::to_string(rec).c_str());
        if (r.rank != rank || r.seq != 1 || std::strcmp(r.op, "allreduce") != 0 || r.peer < 0 ||
            r.peer > 2 || r.peer == rank || r.waited_ms < 600) {
          return 2;
        }
        return 20 + r.peer;
      },
      std::chrono::seconds(60));
  ASSERT_EQ(codes.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(codes[r], 20) << "rank " << r;
    EXPECT_LE(codes[r], 22) << "rank " << r;
  }
  EXPECT_TRUE(codes[0] == 22 || codes[1] == 22) << codes[0] << " " << codes[1];
}

INSTANTIATE_TEST_SUITE_P(Transports, ProxyOverComm,
                         ::testing::ValuesIn(spark::test::test_transports()));

}  // namespace
