// A rank program for the GPU fail-stop test under sparkrun (tests/kernels/gpu_sparkrun_fault.sh):
// one good device allreduce (and one chunked, larger than the channel), then rank 1 stops (SIGSTOP)
// and the others' next device allreduce must fail: the record is written to pinned memory, the
// communicator fails, sparkrun aborts the group and prints the record. Exits 77 (skip) without a
// GPU.
#include <cuda_runtime_api.h>
#include <signal.h>

#include <cstdio>
#include <vector>

#include "spark/cuda.hpp"
#include "spark/spark.hpp"

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  auto comm = spark::init();
  spark::cuda::DeviceComm dev(comm, 1 << 16);
  constexpr std::size_t kCount = 1024;
  std::vector<float> host(kCount, 1.0f);
  void* d = nullptr;
  if (cudaMalloc(&d, kCount * sizeof(float)) != cudaSuccess) return 4;
  cudaMemcpy(d, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  dev.allreduce(d, d, kCount, spark::DType::f32, spark::ReduceOp::sum, nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess) return 5;
  cudaMemcpy(host.data(), d, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  if (host[0] != static_cast<float>(comm.size())) {
    std::fprintf(stderr, "rank %d: wrong sum %g\n", comm.rank(), host[0]);
    return 6;
  }
  // Larger than the 64 KiB channel: one launch per chunk; every element must be the exact sum.
  constexpr std::size_t kBig = 100'003;
  std::vector<float> big(kBig);
  for (std::size_t i = 0; i < kBig; ++i) big[i] = static_cast<float>(i % 97 + comm.rank());
  void* db = nullptr;
  if (cudaMalloc(&db, kBig * sizeof(float)) != cudaSuccess) return 4;
  cudaMemcpy(db, big.data(), kBig * sizeof(float), cudaMemcpyHostToDevice);
  dev.allreduce(db, db, kBig, spark::DType::f32, spark::ReduceOp::sum, nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess) return 5;
  cudaMemcpy(big.data(), db, kBig * sizeof(float), cudaMemcpyDeviceToHost);
  const int p = comm.size();
  for (std::size_t i = 0; i < kBig; ++i) {
    const float want = static_cast<float>(p * static_cast<int>(i % 97) + p * (p - 1) / 2);
    if (big[i] != want) {
      std::fprintf(stderr, "rank %d: chunked allreduce element %zu is %g, want %g\n", comm.rank(),
                   i, big[i], want);
      return 6;
    }
  }
  comm.barrier();
  if (comm.rank() == 1) raise(SIGSTOP);
  dev.allreduce(d, d, kCount, spark::DType::f32, spark::ReduceOp::sum, nullptr);
  const cudaError_t e = cudaDeviceSynchronize();  // the group is aborted while we wait here
  std::fprintf(stderr, "rank %d: still running after the peer stopped (sync: %s)\n", comm.rank(),
               cudaGetErrorString(e));
  if (auto r = dev.failure()) std::fprintf(stderr, "record: %s\n", spark::to_string(*r).c_str());
  return 3;
}
