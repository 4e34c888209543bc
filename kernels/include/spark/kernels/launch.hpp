// Host-side launchers of the CUDA kernels (spark_kernels; needs the CUDA runtime headers).
// They return the cudaError_t of the launch; errors inside a kernel show at synchronisation.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "spark/kernels/channel.hpp"
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

/// One thread block: small messages are latency-bound (a PCIe / C2C round trip per flag).
inline constexpr unsigned kSmallAllreduceThreads = 512;

/// The one-kernel small allreduce over a Channel (device addresses). count * element size
/// must fit the channel's capacity. Graph-capturable: the sequence number and the timeout
/// come from the control block at run time, not from these arguments.
struct SmallAllreduceLaunch {
  Channel channel;
  const void* send = nullptr;  ///< device memory; may equal recv
  void* recv = nullptr;
  std::uint64_t count = 0;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
};

cudaError_t launch_small_allreduce(const SmallAllreduceLaunch& p, cudaStream_t stream);

/// Loads every small-allreduce kernel now. With CUDA's lazy module loading (the default), the
/// first launch of a kernel may wait for the context to idle; a kernel that spins on a peer
/// kernel in the same context would then deadlock. Call once before the first launch.
cudaError_t prepare_small_allreduce();

}  // namespace spark::kernels
