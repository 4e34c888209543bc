#include "buffer_view.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace py = pybind11;

namespace spark::python {
namespace {

[[noreturn]] void type_error(const std::string& msg) {
  throw py::type_error(msg);
}

// struct-module format of one element -> DType ('@', '=' and '<' prefixes are native here:
// both target CPUs are little-endian).
std::optional<DType> dtype_of_format(std::string_view fmt, py::ssize_t itemsize) {
  if (!fmt.empty() && (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')) fmt.remove_prefix(1);
  if (fmt.size() != 1) return std::nullopt;
  switch (fmt[0]) {
    case 'f':
      return DType::f32;
    case 'd':
      return DType::f64;
    case 'e':
      return DType::f16;
    case 'B':
      return DType::u8;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DType::i32;
      if (itemsize == 8) return DType::i64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<DType> dtype_of_torch(std::string_view name) {
  if (name == "torch.float32") return DType::f32;
  if (name == "torch.float64") return DType::f64;
  if (name == "torch.float16") return DType::f16;
  if (name == "torch.bfloat16") return DType::bf16;
  if (name == "torch.int32") return DType::i32;
  if (name == "torch.int64") return DType::i64;
  if (name == "torch.uint8") return DType::u8;
  return std::nullopt;
}

bool is_torch_tensor(py::handle obj) {
  // Without importing torch: a tensor's type lives in module "torch" and has data_ptr().
  const auto type = py::type::handle_of(obj);
  if (!py::hasattr(type, "data_ptr")) return false;
  const auto mod = py::str(type.attr("__module__")).cast<std::string>();
  return mod == "torch" || mod.rfind("torch.", 0) == 0;
}

}  // namespace

BufferView::BufferView(py::handle obj, const char* what, bool writable) {
  if (PyObject_CheckBuffer(obj.ptr())) {
    // buffer_info owns the Py_buffer: it releases and deletes it.
    auto view = std::make_unique<Py_buffer>();
    const int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), view.get(), flags) != 0) {
      PyErr_Clear();
      if (writable)
        throw py::value_error(std::string(what) +
                              ": the object is read-only; pass a writable array (the result "
                              "is written into it)");
      type_error(std::string(what) + ": the object does not export a strided buffer");
    }
    Py_buffer* raw = view.release();
    info_.emplace(raw, /*ownview=*/true);
    if (!PyBuffer_IsContiguous(raw, 'C'))
      throw py::value_error(std::string(what) +
                            ": the array is not contiguous (strided or transposed view); pass a "
                            "contiguous one, e.g. numpy.ascontiguousarray(x) or x.contiguous()");
    const auto dt = dtype_of_format(info_->format, info_->itemsize);
    if (!dt)
      type_error(std::string(what) + ": element format '" + info_->format + "' (" +
                 std::to_string(info_->itemsize) + " bytes) is not supported: use " +
                 kSupportedDtypes);
    dtype_ = *dt;
    data_ = info_->ptr;
    count_ = static_cast<std::size_t>(info_->size);
    return;
  }
  if (is_torch_tensor(obj)) {
    const auto name = py::str(obj.attr("dtype")).cast<std::string>();
    const auto dt = dtype_of_torch(name);
    if (!dt)
      type_error(std::string(what) + ": tensor dtype " + name + " is not supported: use " +
                 kSupportedDtypes);
    if (obj.attr("is_cuda").cast<bool>())
      type_error(std::string(what) +
                 ": CUDA tensors are not supported by this sparkrun module yet; pass a CPU "
                 "tensor (or use backend \"nccl\" for the GPU path)");
    if (!obj.attr("is_contiguous")().cast<bool>())
      throw py::value_error(std::string(what) +
                            ": the tensor is not contiguous; pass x.contiguous()");
    tensor_ = py::reinterpret_borrow<py::object>(obj);
    dtype_ = *dt;
    data_ = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<std::uintptr_t>());
    count_ = obj.attr("numel")().cast<std::size_t>();
    return;
  }
  type_error(std::string(what) + ": expected an array with the buffer protocol (numpy array, " +
             "bytearray, memoryview) or a torch tensor, got " +
             py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
}

}  // namespace spark::python
