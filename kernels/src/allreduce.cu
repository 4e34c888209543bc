// The one-kernel small allreduce (see small_allreduce.hpp): one thread block per call.
#include "spark/kernels/device_clock.cuh"
#include "spark/kernels/launch.hpp"
#include "spark/kernels/small_allreduce.hpp"

namespace spark::kernels {
namespace {

struct DeviceExec {
  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ void sync() const { __syncthreads(); }
  __device__ void publish_fence() const { __threadfence_system(); }
  __device__ std::uint64_t broadcast(std::uint64_t v) const {
    __shared__ std::uint64_t value;
    if (threadIdx.x == 0) value = v;
    __syncthreads();
    const std::uint64_t out = value;
    __syncthreads();
    return out;
  }
};

template <class T>
__global__ void small_allreduce_kernel(SmallAllreduceLaunch p) {
  DeviceExec ex;
  GlobalTimerClock clock;
  const KernelStatus st =
      small_allreduce_body<T>(p.channel, static_cast<const T*>(p.send), static_cast<T*>(p.recv),
                              p.count, p.dtype, p.op, ex, clock);
  // The record is in the control block (or was written by whoever failed first): stop the
  // stream here so nothing after this kernel consumes an unfilled buffer.
  if (st != KernelStatus::done) __trap();
}

}  // namespace

cudaError_t launch_small_allreduce(const SmallAllreduceLaunch& p, cudaStream_t stream) {
  if (p.channel.ctl == nullptr || p.count * element_size(p.dtype) > p.channel.capacity) {
    return cudaErrorInvalidValue;
  }
  visit_dtype(p.dtype, [&](auto tag) {
    small_allreduce_kernel<decltype(tag)><<<1, kSmallAllreduceThreads, 0, stream>>>(p);
  });
  return cudaGetLastError();
}

cudaError_t prepare_small_allreduce() {
  cudaError_t first = cudaSuccess;
  for (DType d :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    visit_dtype(d, [&](auto tag) {
      cudaFuncAttributes attr;
      const cudaError_t e = cudaFuncGetAttributes(&attr, small_allreduce_kernel<decltype(tag)>);
      if (first == cudaSuccess) first = e;
    });
  }
  return first;
}

}  // namespace spark::kernels
