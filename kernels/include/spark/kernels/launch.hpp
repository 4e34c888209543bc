// Host-side launchers of the CUDA kernels (spark_kernels; needs the CUDA runtime headers).
// They return the cudaError_t of the launch; errors inside a kernel show at synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "spark/types.hpp"

namespace spark::kernels {

inline constexpr int kMaxReduceInputs = 16;

/// Passed by value as the kernel argument (so it is captured into CUDA graphs as is).
struct ReduceLaunch {
  const void* inputs[kMaxReduceInputs] = {};  ///< device-accessible pointers, rank order
  int n = 0;
  void* out = nullptr;  ///< may equal inputs[r] (in place)
  std::size_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
};

cudaError_t launch_reduce(const ReduceLaunch& p, cudaStream_t stream);

}  // namespace spark::kernels
