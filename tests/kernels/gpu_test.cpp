// GPU tests of the kernels (label gpu). Every test skips with the reason when this machine has
// no usable GPU (no driver, no device). Run them with tests/gpu/run.sh.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/proxy.hpp"
#include "hub.hpp"
#include "spark/kernels/launch.hpp"
#include "spark/kernels/reduce.hpp"

namespace sk = spark::kernels;
using spark::DType;
using spark::ReduceOp;
using spark::test::Hub;
using namespace std::chrono_literals;

namespace {

#define CUDA_OK(expr)                                                      \
  do {                                                                     \
    const cudaError_t e_ = (expr);                                         \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_); \
  } while (0)

/// The reason to skip, or "" when a GPU is usable.
std::string no_gpu_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return std::string("no CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
           "); run tests/gpu/run.sh on a machine with an NVIDIA GPU and driver";
  }
  if (n == 0) return "no CUDA device: the driver reports 0 GPUs";
  return "";
}

#define SKIP_WITHOUT_GPU()                    \
  do {                                        \
    const std::string why_ = no_gpu_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;  \
  } while (0)

const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                         ReduceOp::avg};
const DType kTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                        DType::i32, DType::i64, DType::u8};

/// Deterministic bytes that are valid values of every type (floats: small finite numbers).
void fill(DType dtype, std::vector<std::byte>& buf, std::size_t count, int seed) {
  buf.resize(count * sk::element_size(dtype));
  sk::visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(buf.data());
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint32_t x = static_cast<std::uint32_t>(seed * 7919 + i * 104729) % 2003;
      const float f = (static_cast<float>(x) - 1001.0f) / 173.0f;
      if constexpr (std::is_same_v<T, sk::Half>)
        p[i] = sk::float_to_half(f);
      else if constexpr (std::is_same_v<T, sk::BFloat16>)
        p[i] = sk::float_to_bf16(f);
      else if constexpr (std::is_floating_point_v<T>)
        p[i] = static_cast<T>(f);
      else
        p[i] = static_cast<T>(static_cast<int>(x) - 1001);
    }
  });
}

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) {
    if (cudaMalloc(&ptr, bytes == 0 ? 1 : bytes) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* ptr = nullptr;
};

TEST(GpuReduce, MatchesHostReferenceBitForBit) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t kCount = 10007;  // not a multiple of the block size
  for (DType dtype : kTypes) {
    for (int n = 1; n <= 4; ++n) {
      std::vector<std::vector<std::byte>> in(n);
      std::vector<std::unique_ptr<DeviceBuffer>> din;
      sk::ReduceLaunch p;
      const void* host_ptrs[4];
      for (int r = 0; r < n; ++r) {
        fill(dtype, in[r], kCount, r + 1);
        din.push_back(std::make_unique<DeviceBuffer>(in[r].size()));
        ASSERT_NE(din[r]->ptr, nullptr);
        CUDA_OK(cudaMemcpy(din[r]->ptr, in[r].data(), in[r].size(), cudaMemcpyHostToDevice));
        p.inputs[r] = din[r]->ptr;
        host_ptrs[r] = in[r].data();
      }
      DeviceBuffer dout(in[0].size());
      for (ReduceOp op : kOps) {
        p.n = n;
        p.out = dout.ptr;
        p.count = kCount;
        p.dtype = dtype;
        p.op = op;
        CUDA_OK(sk::launch_reduce(p, nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<std::byte> got(in[0].size()), want(in[0].size());
        CUDA_OK(cudaMemcpy(got.data(), dout.ptr, got.size(), cudaMemcpyDeviceToHost));
        sk::reduce_reference(dtype, op, host_ptrs, n, want.data(), kCount);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
            << spark::to_string(dtype) << " " << spark::to_string(op) << " n=" << n;
      }
    }
  }
}

/// One rank of an in-process group: pinned mapped channel, host proxy, its own stream.
struct GpuRank {
  GpuRank(int rank, int size, std::size_t capacity, std::uint32_t timeout_ms,
          std::uint32_t grace_ms, Hub& hub) {
    const std::size_t total = sk::channel_layout(size, 1, capacity).total;
    if (cudaHostAlloc(&host, total, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
      host = nullptr;
      return;
    }
    std::memset(host, 0, total);
    void* dev = nullptr;
    cudaHostGetDevicePointer(&dev, host, 0);
    hch = sk::make_channel(host, rank, size, 1, capacity);
    dch = sk::make_channel(dev, rank, size, 1, capacity);
    sk::init_control_block(hch.ctl, rank, timeout_ms);
    hch.ctl->grace_ms = grace_ms;
    hch.ctl->lane_count = 1;
    std::strcpy(hch.ctl->lane_names[0], "in-process");
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (sk::prepare_small_allreduce() != cudaSuccess) {  // no lazy loading while kernels spin
      cudaFreeHost(host);
      host = nullptr;
      return;
    }
    proxy = std::make_unique<spark::cuda::Proxy>(
        hch, [&hub, rank](const void* in, void* out, std::size_t bytes) {
          hub.exchange(rank, in, out, bytes);
        });
  }
  ~GpuRank() {
    proxy.reset();
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (host != nullptr) cudaFreeHost(host);
  }
  cudaError_t launch(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
    sk::SmallAllreduceLaunch p;
    p.channel = dch;
    p.send = send;
    p.recv = recv;
    p.count = count;
    p.dtype = dtype;
    p.op = op;
    return sk::launch_small_allreduce(p, stream);
  }
  void* host = nullptr;
  sk::Channel hch, dch;
  cudaStream_t stream = nullptr;
  std::unique_ptr<spark::cuda::Proxy> proxy;
};

TEST(GpuSmallAllreduce, OneToFourRanksMatchReference) {
  SKIP_WITHOUT_GPU();
  constexpr std::size_t kCount = 3001;
  for (int size = 1; size <= 4; ++size) {
    Hub hub(size, 30s);
    std::vector<std::unique_ptr<GpuRank>> ranks;
    for (int r = 0; r < size; ++r) {
      ranks.push_back(std::make_unique<GpuRank>(r, size, kCount * 8, 30000, 2000, hub));
      ASSERT_NE(ranks[r]->host, nullptr);
    }
    for (DType dtype : kTypes) {
      for (ReduceOp op : kOps) {
        std::vector<std::vector<std::byte>> in(size);
        std::vector<std::unique_ptr<DeviceBuffer>> din, dout;
        const void* host_ptrs[4];
        for (int r = 0; r < size; ++r) {
          fill(dtype, in[r], kCount, r + 3);
          host_ptrs[r] = in[r].data();
          din.push_back(std::make_unique<DeviceBuffer>(in[r].size()));
          dout.push_back(std::make_unique<DeviceBuffer>(in[r].size()));
          CUDA_OK(cudaMemcpy(din[r]->ptr, in[r].data(), in[r].size(), cudaMemcpyHostToDevice));
        }
        for (int r = 0; r < size; ++r) {
          CUDA_OK(ranks[r]->launch(din[r]->ptr, dout[r]->ptr, kCount, dtype, op));
        }
        for (int r = 0; r < size; ++r) CUDA_OK(cudaStreamSynchronize(ranks[r]->stream));
        std::vector<std::byte> want(in[0].size()), got(in[0].size());
        sk::reduce_reference(dtype, op, host_ptrs, size, want.data(), kCount);
        for (int r = 0; r < size; ++r) {
          CUDA_OK(cudaMemcpy(got.data(), dout[r]->ptr, got.size(), cudaMemcpyDeviceToHost));
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
              << "size " << size << " rank " << r << " " << spark::to_string(dtype) << " "
              << spark::to_string(op);
        }
      }
    }
  }
}

TEST(GpuSmallAllreduce, GraphCaptureAnd1000Replays) {
  SKIP_WITHOUT_GPU();
  constexpr int kRanks = 2;
  constexpr std::size_t kCount = 1024;
  Hub hub(kRanks, 30s);
  std::vector<std::unique_ptr<GpuRank>> ranks;
  std::vector<std::unique_ptr<DeviceBuffer>> din, dout;
  std::vector<cudaGraphExec_t> execs(kRanks, nullptr);
  std::vector<std::vector<std::byte>> in(kRanks);
  const void* host_ptrs[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    ranks.push_back(std::make_unique<GpuRank>(r, kRanks, kCount * 4, 30000, 2000, hub));
    fill(DType::f32, in[r], kCount, r + 11);
    host_ptrs[r] = in[r].data();
    din.push_back(std::make_unique<DeviceBuffer>(in[r].size()));
    dout.push_back(std::make_unique<DeviceBuffer>(in[r].size()));
    CUDA_OK(cudaMemcpy(din[r]->ptr, in[r].data(), in[r].size(), cudaMemcpyHostToDevice));
    cudaGraph_t graph = nullptr;
    CUDA_OK(cudaStreamBeginCapture(ranks[r]->stream, cudaStreamCaptureModeThreadLocal));
    CUDA_OK(ranks[r]->launch(din[r]->ptr, dout[r]->ptr, kCount, DType::f32, ReduceOp::sum));
    CUDA_OK(cudaStreamEndCapture(ranks[r]->stream, &graph));
    CUDA_OK(cudaGraphInstantiate(&execs[r], graph, 0));
    cudaGraphDestroy(graph);
  }
  for (int i = 0; i < 1000; ++i) {
    for (int r = 0; r < kRanks; ++r) CUDA_OK(cudaGraphLaunch(execs[r], ranks[r]->stream));
  }
  for (int r = 0; r < kRanks; ++r) CUDA_OK(cudaStreamSynchronize(ranks[r]->stream));
  std::vector<std::byte> want(in[0].size()), got(in[0].size());
  sk::reduce_reference(DType::f32, ReduceOp::sum, host_ptrs, kRanks, want.data(), kCount);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ranks[r]->hch.ctl->device_seq, 1000u);  // sequence numbers advanced in the graph
    EXPECT_EQ(ranks[r]->proxy->served(), 1000u);
    CUDA_OK(cudaMemcpy(got.data(), dout[r]->ptr, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << "rank " << r;
    cudaGraphExecDestroy(execs[r]);
  }
}

/// In a child process (the trap poisons the CUDA context): rank 1 of 2 never launches; rank 0's
/// kernel must trap, and its record must be readable from pinned memory afterwards.
/// `after_capture`: capture with a 60 s timeout, then lower it to 200 ms before replaying.
[[noreturn]] void peer_stops_child(bool after_capture) {
  Hub hub(2, 600s);  // the proxy waits "forever": the kernel's own wait must fire
  GpuRank r0(0, 2, 4096, after_capture ? 60000 : 200, 0, hub);
  GpuRank r1(1, 2, 4096, 60000, 0, hub);  // never launches
  DeviceBuffer d(4096);
  const auto t0 = std::chrono::steady_clock::now();
  cudaError_t e;
  if (after_capture) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(r0.stream, cudaStreamCaptureModeThreadLocal);
    r0.launch(d.ptr, d.ptr, 256, DType::f32, ReduceOp::sum);
    cudaStreamEndCapture(r0.stream, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    sk::set_timeout_ms(r0.hch.ctl, 200);  // after capture: must still take effect
    cudaGraphLaunch(exec, r0.stream);
    e = cudaStreamSynchronize(r0.stream);
  } else {
    r0.launch(d.ptr, d.ptr, 256, DType::f32, ReduceOp::sum);
    e = cudaStreamSynchronize(r0.stream);
  }
  const long ms = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  const sk::FailureRecordData& rec = r0.hch.ctl->record;
  std::fprintf(stderr,
               "sync=%s state=%u peer=%d seq=%llu timeout=%u waited_ok=%d took_ok=%d lane=%s\n",
               e == cudaSuccess ? "ok" : "error", r0.hch.ctl->state, rec.peer,
               static_cast<unsigned long long>(rec.seq), rec.timeout_ms,
               rec.waited_ms >= 200 ? 1 : 0, ms < 30000 ? 1 : 0, rec.lane);
  std::fflush(stderr);
  _exit(3);  // no destructors: the context is gone, and the proxy of r0 waits in the hub
}

TEST(GpuSmallAllreduceDeathTest, PeerStopsKernelTrapsRecordReadable) {
  SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(peer_stops_child(false), ::testing::ExitedWithCode(3),
              "sync=error state=2 peer=1 seq=1 timeout=200 waited_ok=1 took_ok=1 lane=in-process");
}

TEST(GpuSmallAllreduceDeathTest, TimeoutSetAfterCaptureTakesEffect) {
  SKIP_WITHOUT_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(peer_stops_child(true), ::testing::ExitedWithCode(3),
              "sync=error state=2 peer=1 seq=1 timeout=200 waited_ok=1 took_ok=1");
}

}  // namespace
