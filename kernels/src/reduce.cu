// The generic N-input reduce kernel: out[i] = in[0][i] op in[1][i] ... in rank order.
#include "spark/kernels/launch.hpp"
#include "spark/kernels/reduce.hpp"

namespace spark::kernels {
namespace {

template <class T>
__global__ void reduce_kernel(ReduceLaunch p) {
  const T* const* in = reinterpret_cast<const T* const*>(p.inputs);
  T* out = static_cast<T*>(p.out);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count;
       i += stride) {
    out[i] = reduce_element<T>(p.op, p.n, [&](int r) { return in[r][i]; });
  }
}

}  // namespace

cudaError_t launch_reduce(const ReduceLaunch& p, cudaStream_t stream) {
  if (p.n < 1 || p.n > kMaxReduceInputs || p.out == nullptr) return cudaErrorInvalidValue;
  if (p.count == 0) return cudaSuccess;
  constexpr unsigned threads = 256;
  const std::size_t want = (p.count + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 1024 ? want : 1024);
  visit_dtype(p.dtype,
              [&](auto tag) { reduce_kernel<decltype(tag)><<<blocks, threads, 0, stream>>>(p); });
  return cudaGetLastError();
}

}  // namespace spark::kernels
