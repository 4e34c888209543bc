// What a collective needs from a Python argument: address, element count and dtype. Objects
// with the buffer protocol (numpy arrays, bytearray, memoryview) and torch tensors; GPU memory
// (CUDA torch tensors, objects with __cuda_array_interface__ such as CuPy arrays) where the
// caller takes it (allreduce's device path).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "spark/types.hpp"

namespace spark::python {

/// A view of one argument, valid while it lives (it keeps the exported buffer or the tensor
/// referenced, so the memory cannot move while the GIL is released). Destroy it with the GIL
/// held.
class BufferView {
 public:
  /// Throws TypeError (unsupported dtype, no buffer protocol, GPU memory unless
  /// `device_ok`), ValueError (non-contiguous) or ValueError for a read-only object when
  /// `writable`. `what` names the argument in messages ("send", "recv", "buffer").
  BufferView(pybind11::handle obj, const char* what, bool writable, bool device_ok = false);
  BufferView(BufferView&&) noexcept = default;
  BufferView& operator=(BufferView&&) noexcept = default;

  void* data() const noexcept { return data_; }
  std::size_t count() const noexcept { return count_; }
  DType dtype() const noexcept { return dtype_; }
  std::size_t bytes() const noexcept { return count_ * dtype_size(dtype_); }
  /// GPU memory (the device path), else host memory.
  bool on_device() const noexcept { return device_; }
  /// The CUDA stream the producer named (torch: its current stream on the tensor's device;
  /// __cuda_array_interface__ v3: "stream", 1 meaning the legacy default stream); nullopt:
  /// none named.
  std::optional<std::uintptr_t> stream() const noexcept { return stream_; }

 private:
  std::optional<pybind11::buffer_info> info_;  // buffer protocol: the export, released on destroy
  pybind11::object tensor_;                    // torch tensor: a reference
  void* data_ = nullptr;
  std::size_t count_ = 0;
  DType dtype_ = DType::u8;
  bool device_ = false;
  std::optional<std::uintptr_t> stream_;
};

/// The spellings accepted, for messages.
inline constexpr const char* kSupportedDtypes =
    "float32, float64, float16, bfloat16 (torch), int32, int64 or uint8";

}  // namespace spark::python
