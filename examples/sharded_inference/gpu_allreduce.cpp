#include "gpu_allreduce.hpp"

#include <cuda_runtime.h>

#include <spark/cuda.hpp>
#include <spark/spark.hpp>
#include <stdexcept>
#include <string>

namespace spark::example {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class DeviceAllreduce final : public GpuAllreduce {
 public:
  DeviceAllreduce(spark::Communicator& comm, std::size_t max_floats)
      : dev_(comm, max_floats * sizeof(float)), max_(max_floats) {
    check(cudaMalloc(&buf_, max_floats * sizeof(float)), "cudaMalloc");
  }
  ~DeviceAllreduce() override { cudaFree(buf_); }
  void operator()(float* host, std::size_t n) override {
    if (n > max_) throw std::logic_error("GPU allreduce larger than planned");
    check(cudaMemcpy(buf_, host, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    dev_.allreduce(buf_, buf_, n, spark::DType::f32, spark::ReduceOp::sum, nullptr);
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    dev_.check_health();
    check(cudaMemcpy(host, buf_, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

 private:
  spark::cuda::DeviceComm dev_;
  std::size_t max_;
  float* buf_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuAllreduce> GpuAllreduce::try_create(spark::Communicator& comm,
                                                       std::size_t max_floats) {
  int count = 0;
  std::int32_t have = cudaGetDeviceCount(&count) == cudaSuccess && count > 0 ? 1 : 0;
  if (have) have = cudaSetDevice(comm.local_rank() % count) == cudaSuccess ? 1 : 0;
  comm.allreduce(&have, &have, 1, spark::DType::i32, spark::ReduceOp::min);  // all or none
  if (!have) return nullptr;
  return std::make_unique<DeviceAllreduce>(comm, max_floats);
}

}  // namespace spark::example
