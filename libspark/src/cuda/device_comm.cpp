// spark::cuda::DeviceComm with CUDA: the pinned channel, the host proxy and the kernel launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator_impl.hpp"
#include "cuda/control_link.hpp"
#include "cuda/proxy.hpp"
#include "spark/communicator.hpp"
#include "spark/cuda.hpp"
#include "spark/error.hpp"
#include "spark/kernels/channel.hpp"
#include "spark/kernels/launch.hpp"
#include "spark/kernels/reduce.hpp"

namespace spark::cuda {

namespace sk = spark::kernels;

namespace {

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

void require_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    throw InvalidUsage(
        "no CUDA device (" +
        (e != cudaSuccess ? cuda_text(e) : std::string("the driver reports 0 GPUs")) +
        "): device buffers need an NVIDIA GPU and its driver; pass host buffers "
        "to spark::Communicator otherwise");
  }
}

/// Pinned host memory mapped into the GPU's address space.
class PinnedMapped {
 public:
  explicit PinnedMapped(std::size_t bytes) {
    const cudaError_t e = cudaHostAlloc(&host_, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (e != cudaSuccess) {
      throw Error("cudaHostAlloc of " + std::to_string(bytes) + " bytes failed (" + cuda_text(e) +
                  "): lower max_bytes or raise the locked-memory limit");
    }
    std::memset(host_, 0, bytes);
    const cudaError_t d = cudaHostGetDevicePointer(&device_, host_, 0);
    if (d != cudaSuccess) {
      cudaFreeHost(host_);
      throw Error("cudaHostGetDevicePointer failed (" + cuda_text(d) + ")");
    }
  }
  ~PinnedMapped() {
    if (host_ != nullptr) cudaFreeHost(host_);  // errors (e.g. after a trap) are ignored
  }
  PinnedMapped(const PinnedMapped&) = delete;
  PinnedMapped& operator=(const PinnedMapped&) = delete;
  void* host() const noexcept { return host_; }
  void* device() const noexcept { return device_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

}  // namespace

class DeviceCommImpl {
 public:
  DeviceCommImpl(Communicator& comm, std::size_t max_bytes)
      : comm_(comm),
        max_bytes_(max_bytes),
        mem_(sk::channel_layout(comm.size(), 1, max_bytes).total),
        host_(sk::make_channel(mem_.host(), comm.rank(), comm.size(), 1, max_bytes)),
        device_(sk::make_channel(mem_.device(), comm.rank(), comm.size(), 1, max_bytes)),
        link_(internal::impl(comm), host_.ctl) {
    const cudaError_t e = sk::prepare_small_allreduce();
    if (e != cudaSuccess) {
      throw Error("loading the device allreduce kernels failed (" + cuda_text(e) +
                  "): was libspark built for this GPU? (CMAKE_CUDA_ARCHITECTURES)");
    }
    Communicator* c = &comm_;
    proxy_ = std::make_unique<Proxy>(
        host_,
        [c](const void* in, void* out, std::size_t bytes) {
          c->allgather(in, out, bytes, DType::u8);
        },
        [this](const sk::FailureRecordData&) { on_failure(); });
  }

  ~DeviceCommImpl() {
    // A kernel in flight needs the proxy and the channel: let it finish (or trap) first.
    cudaDeviceSynchronize();
    proxy_.reset();  // then link_ unregisters the control block's timeout
  }

  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                 Stream stream) {
    check_health();
    const std::size_t elem = sk::element_size(dtype);
    if (count > 0 && (!accessible(send) || !accessible(recv))) {
      throw InvalidUsage(
          "spark::cuda::DeviceComm::allreduce: send/recv are not GPU-accessible memory; pass "
          "device (or managed / pinned) pointers, or use spark::Communicator for host buffers");
    }
    // Larger than the channel: one small allreduce per channel-sized chunk, in stream order.
    // Each launch takes its own sequence number from the control block, so the chunks stay
    // graph-capturable and every chunk is reduced in the same fixed rank order (bit-identical).
    const std::size_t chunk = std::max<std::size_t>(1, max_bytes_ / elem);
    if (max_bytes_ < elem)
      throw InvalidUsage("spark::cuda::DeviceComm::allreduce: max_bytes " +
                         std::to_string(max_bytes_) + " is smaller than one element (" +
                         std::to_string(elem) +
                         " bytes): construct the DeviceComm with a larger max_bytes");
    std::size_t done = 0;
    do {
      const std::size_t n = std::min(chunk, count - done);
      sk::SmallAllreduceLaunch p;
      p.channel = device_;
      p.send = static_cast<const std::byte*>(send) + done * elem;
      p.recv = static_cast<std::byte*>(recv) + done * elem;
      p.count = n;
      p.dtype = dtype;
      p.op = op;
      const cudaError_t e = sk::launch_small_allreduce(p, reinterpret_cast<cudaStream_t>(stream));
      if (e != cudaSuccess)
        throw Error("device allreduce: kernel launch failed (" + cuda_text(e) + ")");
      done += n;
    } while (done < count);
    if (std::find(pending_.begin(), pending_.end(), stream) == pending_.end())
      pending_.push_back(stream);
  }

  void synchronize() {
    while (!pending_.empty()) {
      const Stream s = pending_.back();
      const cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
      // A stream that failed is not waited for again (its error would repeat); the others
      // stay pending, so the next synchronize() still waits for them.
      pending_.pop_back();
      if (e == cudaSuccess) continue;
      check_health();  // a kernel that trapped wrote its record first
      if (e == cudaErrorStreamCaptureUnsupported || e == cudaErrorStreamCaptureImplicit ||
          e == cudaErrorStreamCaptureInvalidated) {
        throw InvalidUsage(
            "spark::cuda::DeviceComm::synchronize: a stream with a device allreduce is being "
            "captured into a CUDA graph (" +
            cuda_text(e) + "); end the capture before a host collective on this communicator");
      }
      throw Error("device allreduce: cudaStreamSynchronize failed (" + cuda_text(e) + ")");
    }
  }

  std::optional<FailureRecord> failure() const {
    if (const sk::FailureRecordData* record = sk::published_record(host_.ctl)) {
      static_assert(sizeof(FailureRecord) == sizeof(sk::FailureRecordData));
      FailureRecord r;
      std::memcpy(static_cast<void*>(&r), record, sizeof r);
      return r;
    }
    return comm_.failure();
  }

  void check_health() const {
    if (auto r = failure()) throw CommFailure(*r);
  }

  void set_timeout_ms(std::uint32_t ms) { comm_.set_timeout_ms(ms); }  // + the mirror
  std::uint32_t timeout_ms() const noexcept {
    return __atomic_load_n(&host_.ctl->timeout_ms, __ATOMIC_ACQUIRE);
  }
  std::size_t max_bytes() const noexcept { return max_bytes_; }
  void set_report_failures(bool on) noexcept { internal::impl(comm_).set_report_failures(on); }

 private:
  /// Proxy thread, once: a GPU-side record (a kernel's wait expired) fails the communicator
  /// and, by its report policy, aborts the rank group (first record wins; a failure of the
  /// communicator itself was reported by it already).
  void on_failure() {
    if (auto r = failure()) internal::impl(comm_).fail_external(*r);
  }

  static bool accessible(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error state of this call
      return false;
    }
    if (a.type != cudaMemoryTypeUnregistered) return true;
    // Plain malloc memory: usable where the GPU reads pageable memory (GB10, Grace, HMM).
    int dev = 0, pageable = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, dev);
    return pageable != 0;
  }

  Communicator& comm_;
  std::size_t max_bytes_;
  PinnedMapped mem_;
  sk::Channel host_, device_;
  /// The control block filled and registered (Communicator::set_timeout_ms writes its
  /// timeout, so captured graphs see it): the same code the host tests check.
  ControlBlockLink link_;
  std::unique_ptr<Proxy> proxy_;
  std::vector<Stream> pending_;  ///< streams with allreduces enqueued since synchronize()
};

bool built_with_cuda() noexcept {
  return true;
}

bool is_device_pointer(const void* ptr) noexcept {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

DeviceComm::DeviceComm(Communicator& comm, std::size_t max_bytes) {
  require_device();
  impl_ = std::make_unique<DeviceCommImpl>(comm, max_bytes);
}
DeviceComm::~DeviceComm() = default;
DeviceComm::DeviceComm(DeviceComm&&) noexcept = default;
DeviceComm& DeviceComm::operator=(DeviceComm&&) noexcept = default;

void DeviceComm::allreduce(const void* send, void* recv, std::size_t count, DType dtype,
                           ReduceOp op, Stream stream) {
  impl_->allreduce(send, recv, count, dtype, op, stream);
}
void DeviceComm::synchronize() {
  impl_->synchronize();
}
std::optional<FailureRecord> DeviceComm::failure() const {
  return impl_->failure();
}
void DeviceComm::check_health() const {
  impl_->check_health();
}
void DeviceComm::set_timeout_ms(std::uint32_t ms) {
  impl_->set_timeout_ms(ms);
}
std::uint32_t DeviceComm::timeout_ms() const noexcept {
  return impl_->timeout_ms();
}
std::size_t DeviceComm::max_bytes() const noexcept {
  return impl_->max_bytes();
}
void DeviceComm::set_report_failures(bool on) noexcept {
  impl_->set_report_failures(on);
}

}  // namespace spark::cuda
