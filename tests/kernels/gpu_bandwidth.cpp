// gpu_bandwidth: the figure tests/gpu/run.sh prints. Compares the 2-input reduce kernel with
// cudaMemcpy device-to-device on the same buffers (both memory-bound; bytes moved count reads
// and writes: memcpy 2 x size, reduce 3 x size), and times the one-kernel small allreduce of
// two in-process ranks (kernel + host proxy round trip).
//   gpu_bandwidth [MiB]      (default 256)
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cuda/proxy.hpp"
#include "hub.hpp"
#include "spark/kernels/launch.hpp"

namespace sk = spark::kernels;
using spark::DType;
using spark::ReduceOp;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gpu_bandwidth: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <class F>
double best_ms(int reps, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "record");
    f();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    if (ms < best) best = ms;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  if (argc > 1) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(argv[1], &end, 10);
    if (end == argv[1] || *end != '\0' || v == 0 || v > 16384) {
      std::fprintf(stderr, "usage: gpu_bandwidth [MiB 1..16384]\n");
      return 2;
    }
    mib = v;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "gpu_bandwidth: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const std::size_t bytes = mib << 20;
  void *a = nullptr, *b = nullptr, *out = nullptr;
  check(cudaMalloc(&a, bytes), "malloc");
  check(cudaMalloc(&b, bytes), "malloc");
  check(cudaMalloc(&out, bytes), "malloc");
  check(cudaMemset(a, 0, bytes), "memset");
  check(cudaMemset(b, 0, bytes), "memset");

  const double copy_ms = best_ms(
      10, [&] { check(cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice), "memcpy"); });
  std::printf("device: %s (sm_%d%d), buffer %zu MiB\n", prop.name, prop.major, prop.minor, mib);
  std::printf("cudaMemcpy D2D          : %8.1f GB/s (read+write)\n", 2.0 * bytes / copy_ms / 1e6);
  for (DType d : {DType::f32, DType::bf16}) {
    sk::ReduceLaunch p;
    p.inputs[0] = a;
    p.inputs[1] = b;
    p.n = 2;
    p.out = out;
    p.count = bytes / (d == DType::f32 ? 4 : 2);
    p.dtype = d;
    p.op = ReduceOp::sum;
    const double ms = best_ms(10, [&] { check(sk::launch_reduce(p, nullptr), "reduce"); });
    std::printf("reduce 2 inputs, %-5s: %8.1f GB/s (2 reads + 1 write) = %.0f%% of memcpy\n",
                spark::to_string(d).data(), 3.0 * bytes / ms / 1e6,
                100.0 * (3.0 * bytes / ms) / (2.0 * bytes / copy_ms));
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);

  // Small allreduce latency: two in-process ranks, each a kernel on its own stream + proxy.
  check(sk::prepare_small_allreduce(), "prepare");
  spark::test::Hub hub(2, std::chrono::seconds(30));
  for (std::size_t sz : {std::size_t{4} << 10, std::size_t{64} << 10}) {
    struct R {
      void* host = nullptr;
      sk::Channel hch, dch;
      cudaStream_t s = nullptr;
      void* buf = nullptr;
      std::unique_ptr<spark::cuda::Proxy> proxy;
    } r[2];
    for (int i = 0; i < 2; ++i) {
      const std::size_t total = sk::channel_layout(2, 1, sz).total;
      check(cudaHostAlloc(&r[i].host, total, cudaHostAllocMapped), "hostalloc");
      std::memset(r[i].host, 0, total);
      void* dev = nullptr;
      check(cudaHostGetDevicePointer(&dev, r[i].host, 0), "devptr");
      r[i].hch = sk::make_channel(r[i].host, i, 2, 1, sz);
      r[i].dch = sk::make_channel(dev, i, 2, 1, sz);
      sk::init_control_block(r[i].hch.ctl, i, 10000);
      check(cudaStreamCreateWithFlags(&r[i].s, cudaStreamNonBlocking), "stream");
      check(cudaMalloc(&r[i].buf, sz), "malloc");
      check(cudaMemset(r[i].buf, 0, sz), "memset");
      r[i].proxy = std::make_unique<spark::cuda::Proxy>(
          r[i].hch,
          [&hub, i](const void* in, void* o, std::size_t nb) { hub.exchange(i, in, o, nb); });
    }
    constexpr int kIters = 200;
    auto run = [&](int iters) {
      for (int k = 0; k < iters; ++k) {
        for (int i = 0; i < 2; ++i) {
          sk::SmallAllreduceLaunch p;
          p.channel = r[i].dch;
          p.send = r[i].buf;
          p.recv = r[i].buf;
          p.count = sz / 4;
          p.dtype = DType::f32;
          check(sk::launch_small_allreduce(p, r[i].s), "allreduce");
        }
      }
      for (int i = 0; i < 2; ++i) check(cudaStreamSynchronize(r[i].s), "allreduce sync");
    };
    run(10);
    const auto t0 = std::chrono::steady_clock::now();
    run(kIters);
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        kIters;
    std::printf("small allreduce, 2 in-process ranks, %3zu KiB f32: %8.1f us per call\n", sz >> 10,
                us);
    for (int i = 0; i < 2; ++i) {
      r[i].proxy.reset();
      cudaStreamDestroy(r[i].s);
      cudaFree(r[i].buf);
      cudaFreeHost(r[i].host);
    }
  }
  return 0;
}
