// The GPU path (built only with CUDA): the row-parallel allreduce runs on a device buffer
// through spark::cuda::DeviceComm. Compute stays on the host in this example; the point is the
// device-buffer collective a GPU model would call.
#pragma once

#include <cstddef>
#include <memory>

namespace spark {
class Communicator;
}

namespace spark::example {

class GpuAllreduce {
 public:
  /// Every rank calls this; it returns a GpuAllreduce on every rank when every rank has a
  /// usable GPU, else nullptr on every rank (the host path).
  static std::unique_ptr<GpuAllreduce> try_create(spark::Communicator& comm,
                                                  std::size_t max_floats);
  virtual ~GpuAllreduce() = default;
  /// Copies host[0..n) to the device, allreduces (sum) there, copies the result back.
  virtual void operator()(float* host, std::size_t n) = 0;
};

}  // namespace spark::example
