// Collectives on GPU buffers, enqueued on a CUDA stream (and capturable into CUDA graphs).
//
//   spark::Communicator comm = spark::init();
//   spark::cuda::DeviceComm dev(comm);                  // pinned channel + host proxy thread
//   dev.allreduce(d_in, d_out, n, spark::DType::bf16, spark::ReduceOp::sum, stream);
//
// One kernel per call: it stages the input into pinned host memory, the proxy thread sends it
// to every peer, the kernel waits on per-peer flags and reduces in fixed rank order, so every
// rank gets bit-identical results. A wait that passes SPARKNET_ROCE_TIMEOUT_MS writes the
// failure record into pinned host memory, marks the communicator failed and traps (the CUDA
// context is then unusable; failure() still reads the record). set_timeout_ms() takes effect
// in kernels already captured in a graph: they read the value from pinned memory.
//
// This header needs no CUDA headers: Stream is the same type as cudaStream_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "spark/failure.hpp"
#include "spark/types.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace spark {

class Communicator;

namespace cuda {

using Stream = CUstream_st*;

/// Whether this libspark was built with CUDA (SPARK_ENABLE_CUDA).
bool built_with_cuda() noexcept;

/// True when ptr points to GPU memory (device or managed); false for host memory, and always
/// false without CUDA or without a GPU.
bool is_device_pointer(const void* ptr) noexcept;

class DeviceCommImpl;

/// Device-buffer collectives on top of a Communicator (which must outlive this object).
/// Throws spark::InvalidUsage "device pointer passed but libspark was built without CUDA ..."
/// in a build without CUDA, and "no CUDA device ..." when no GPU / driver is usable.
///
/// Threading: the proxy thread runs the communicator's collectives while a device collective
/// is in flight; do not call host collectives on the same communicator, or on a split or dup
/// of it (they share its connections), until the stream has synchronised (synchronize(), or
/// the stream itself); a communicator of its own (a second spark::init) is independent.
class DeviceComm {
 public:
  /// `max_bytes`: the channel size, the largest allreduce (count * element size) done in one
  /// kernel launch; larger calls run as one launch per max_bytes chunk, in stream order. The
  /// pinned channel holds (size + 1) * max_bytes.
  explicit DeviceComm(Communicator& comm, std::size_t max_bytes = std::size_t{1} << 20);
  ~DeviceComm();
  DeviceComm(DeviceComm&&) noexcept;
  DeviceComm& operator=(DeviceComm&&) noexcept;

  /// Enqueues an allreduce of `count` elements on `stream` (0 = legacy default stream).
  /// send and recv are device pointers; recv may equal send. Returns at once; the result is
  /// ready when the stream reaches it. Throws spark::CommFailure if the communicator has
  /// already failed, spark::InvalidUsage for host pointers.
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Stream stream);

  /// Waits until every allreduce enqueued so far has completed: it synchronises each stream
  /// one was enqueued on (so it also waits for what was queued there after it; keep those
  /// streams alive until then). A kernel's own wait is bounded by the timeout, so this is too,
  /// past the GPU work queued before it. Host collectives on the communicator (and on its
  /// splits and dups, which share its connections) are safe afterwards: the proxy is idle.
  /// Replays of a captured graph are not enqueued here: synchronise the replay's stream
  /// yourself before a host collective. Throws spark::CommFailure when an allreduce failed,
  /// InvalidUsage when a stream is being captured into a graph (end the capture first).
  void synchronize();
  /// The record written by a kernel or the proxy (readable after a trap), else the
  /// communicator's own record, else nothing.
  std::optional<FailureRecord> failure() const;
  void check_health() const;
  /// Same as comm.set_timeout_ms(): the communicator mirrors its timeout into the control
  /// block that device waits read (also in captured graphs).
  void set_timeout_ms(std::uint32_t ms);
  std::uint32_t timeout_ms() const noexcept;
  std::size_t max_bytes() const noexcept;
  /// A failure first seen on the GPU side (a kernel's wait expired) fails the communicator and
  /// follows its report policy: by default the rank group is aborted through the launcher.
  /// Off = only record (tests that inspect failure() after a trap). Sets the communicator's.
  void set_report_failures(bool on) noexcept;

 private:
  std::unique_ptr<DeviceCommImpl> impl_;
};

}  // namespace cuda
}  // namespace spark
