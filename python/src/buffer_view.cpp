#include "buffer_view.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <pybind11/stl.h>

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

// The spellings of each supported dtype: torch's name and the array-interface kind ("f4" of
// typestr "<f4"; bfloat16 has none: CuPy has no bf16, torch exports its CUDA bf16 tensors as
// tensors).
struct Spelling {
  DType dtype;
  std::string_view torch, kind;
};
constexpr Spelling kSpellings[] = {
    {DType::f32, "torch.float32", "f4"}, {DType::f64, "torch.float64", "f8"},
    {DType::f16, "torch.float16", "f2"}, {DType::bf16, "torch.bfloat16", ""},
    {DType::i32, "torch.int32", "i4"},   {DType::i64, "torch.int64", "i8"},
    {DType::u8, "torch.uint8", "u1"},
};

std::optional<DType> dtype_of_torch(std::string_view name) {
  for (const Spelling& s : kSpellings)
    if (s.torch == name) return s.dtype;
  return std::nullopt;
}

// __cuda_array_interface__ typestr: byte order (little-endian or not applicable), kind, size.
std::optional<DType> dtype_of_typestr(std::string_view t) {
  if (t.size() != 3 || (t[0] != '<' && t[0] != '|' && t[0] != '=')) return std::nullopt;
  for (const Spelling& s : kSpellings)
    if (!s.kind.empty() && s.kind == t.substr(1)) return s.dtype;
  return std::nullopt;
}

[[noreturn]] void device_refused(const char* what) {
  type_error(std::string(what) +
             ": GPU memory (a CUDA tensor or __cuda_array_interface__ object): only allreduce "
             "takes GPU buffers (libspark's device path); for this call pass a host array "
             "(x.cpu()), or use backend \"nccl\"");
}

bool is_torch_tensor(py::handle obj) {
  // Without importing torch: a tensor's type lives in module "torch" and has data_ptr().
  const auto type = py::type::handle_of(obj);
  if (!py::hasattr(type, "data_ptr")) return false;
  const auto mod = py::str(type.attr("__module__")).cast<std::string>();
  return mod == "torch" || mod.rfind("torch.", 0) == 0;
}

}  // namespace

BufferView::BufferView(py::handle obj, const char* what, bool writable, bool device_ok) {
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
    const bool cuda = obj.attr("is_cuda").cast<bool>();
    if (cuda && !device_ok) device_refused(what);
    if (!obj.attr("is_contiguous")().cast<bool>())
      throw py::value_error(std::string(what) +
                            ": the tensor is not contiguous; pass x.contiguous()");
    if (cuda) {  // torch orders work on its current stream of the tensor's device
      device_ = true;
      stream_ = py::module_::import("torch")
                    .attr("cuda")
                    .attr("current_stream")(obj.attr("device"))
                    .attr("cuda_stream")
                    .cast<std::uintptr_t>();
    }
    tensor_ = py::reinterpret_borrow<py::object>(obj);
    dtype_ = *dt;
    data_ = reinterpret_cast<void*>(obj.attr("data_ptr")().cast<std::uintptr_t>());
    count_ = obj.attr("numel")().cast<std::size_t>();
    return;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    if (!device_ok) device_refused(what);
    const py::dict cai = obj.attr("__cuda_array_interface__");
    if (cai.contains("mask") && !cai["mask"].is_none())
      type_error(std::string(what) +
                 ": a masked GPU array (__cuda_array_interface__ \"mask\"): pass the data "
                 "without a mask");
    const auto typestr = cai["typestr"].cast<std::string>();
    const auto dt = dtype_of_typestr(typestr);
    if (!dt)
      type_error(std::string(what) + ": __cuda_array_interface__ typestr '" + typestr +
                 "' is not supported: use " + kSupportedDtypes + " (little-endian)");
    std::size_t count = 1;
    const auto shape = cai["shape"].cast<std::vector<py::ssize_t>>();
    for (py::ssize_t d : shape) count *= static_cast<std::size_t>(d);
    // Contiguous (C order): strides absent/None, or exactly the packed ones.
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      const auto strides = cai["strides"].cast<std::vector<py::ssize_t>>();
      py::ssize_t packed = static_cast<py::ssize_t>(dtype_size(*dt));
      for (std::size_t i = shape.size(); i-- > 0;) {
        if (shape[i] > 1 && (i >= strides.size() || strides[i] != packed))
          throw py::value_error(std::string(what) +
                                ": the GPU array is not contiguous (strided or transposed "
                                "view); pass a contiguous one, e.g. cupy.ascontiguousarray(x)");
        packed *= shape[i];
      }
    }
    const auto data = cai["data"].cast<py::tuple>();
    if (writable && data[1].cast<bool>())
      throw py::value_error(std::string(what) +
                            ": the GPU array is read-only; pass a writable one (the result is "
                            "written into it)");
    if (cai.contains("stream") && !cai["stream"].is_none())
      stream_ = cai["stream"].cast<std::uintptr_t>();
    tensor_ = py::reinterpret_borrow<py::object>(obj);
    device_ = true;
    dtype_ = *dt;
    data_ = reinterpret_cast<void*>(data[0].cast<std::uintptr_t>());
    count_ = count;
    return;
  }
  type_error(std::string(what) + ": expected an array with the buffer protocol (numpy array, " +
             "bytearray, memoryview), a torch tensor or a GPU array, got " +
             py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
}

}  // namespace spark::python
