// A rank program for the GPU fail-stop test under sparkrun (tests/kernels/gpu_sparkrun_fault.sh):
// one good device allreduce, then rank 1 stops (SIGSTOP) and the others' next device allreduce
// must fail: the record is written to pinned memory, the communicator fails, sparkrun aborts
// the group and prints the record. Exits 77 (skip) without a GPU.
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
  comm.barrier();
  if (comm.rank() == 1) raise(SIGSTOP);
  dev.allreduce(d, d, kCount, spark::DType::f32, spark::ReduceOp::sum, nullptr);
  const cudaError_t e = cudaDeviceSynchronize();  // the group is aborted while we wait here
  std::fprintf(stderr, "rank %d: still running after the peer stopped (sync: %s)\n", comm.rank(),
               cudaGetErrorString(e));
  if (auto r = dev.failure()) std::fprintf(stderr, "record: %s\n", spark::to_string(*r).c_str());
  return 3;
}
