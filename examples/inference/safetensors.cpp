#include "safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace spark::example {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SafetensorsError(path + ": " + what);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail(path, std::string("cannot stat: ") + std::strerror(e));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(path, "too short for a safetensors file (" + std::to_string(size_) + " bytes)");
  }
  void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (m == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  map_ = static_cast<const unsigned char*>(m);
  try {
    std::uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | map_[i];
    if (hlen > size_ - 8)
      fail(path, "header length " + std::to_string(hlen) + " exceeds the file size " +
                     std::to_string(size_));
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(map_ + 8, map_ + 8 + hlen);
    } catch (const nlohmann::json::exception& e) {
      fail(path, std::string("header is not valid JSON: ") + e.what());
    }
    if (!header.is_object()) fail(path, "header is not a JSON object");
    data_ = map_ + 8 + hlen;
    const std::size_t data_size = size_ - 8 - hlen;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (const auto& [name, v] : header.items()) {
      if (name == "__metadata__") {
        if (!v.is_object()) fail(path, "__metadata__ is not an object");
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string()) fail(path, "__metadata__." + k + " is not a string");
          metadata_[k] = s.get<std::string>();
        }
        continue;
      }
      const std::string where = "tensor '" + name + "': ";
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
          !v.contains("data_offsets"))
        fail(path, where + "needs dtype, shape and data_offsets");
      if (!v["dtype"].is_string() || v["dtype"].get<std::string>() != "F32")
        fail(path, where + "dtype " + v["dtype"].dump() + " is not supported (only F32)");
      TensorInfo t;
      std::size_t count = 1;
      if (!v["shape"].is_array()) fail(path, where + "shape is not an array");
      for (const auto& d : v["shape"]) {
        if (!d.is_number_unsigned())
          fail(path, where + "shape " + v["shape"].dump() + " is invalid");
        t.shape.push_back(d.get<std::size_t>());
        count *= t.shape.back();
      }
      const auto& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
          !off[1].is_number_unsigned())
        fail(path, where + "data_offsets " + off.dump() + " is not [begin, end]");
      t.begin = off[0].get<std::size_t>();
      t.end = off[1].get<std::size_t>();
      if (t.begin > t.end || t.end > data_size)
        fail(path, where + "data_offsets " + off.dump() + " lie outside the data section (" +
                       std::to_string(data_size) + " bytes)");
      if (t.end - t.begin != count * sizeof(float))
        fail(path, where + "holds " + std::to_string(t.end - t.begin) + " bytes, shape " +
                       v["shape"].dump() + " needs " + std::to_string(count * sizeof(float)));
      ranges.emplace_back(t.begin, t.end);
      tensors_.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second) fail(path, "two tensors overlap");
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(map_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  ::munmap(const_cast<unsigned char*>(map_), size_);
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(path_, "no tensor '" + name + "' (wrong model file?)");
  return it->second;
}

std::vector<float> SafetensorsFile::slice(const std::string& name, std::size_t row0,
                                          std::size_t row1, std::size_t col0,
                                          std::size_t col1) const {
  const TensorInfo& t = info(name);
  if (t.shape.empty() || t.shape.size() > 2) fail(path_, "tensor '" + name + "' is not 1-D or 2-D");
  const std::size_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  const std::size_t cols = t.shape.back();
  if (row0 > row1 || row1 > rows || col0 > col1 || col1 > cols)
    fail(path_, "slice out of range for tensor '" + name + "'");
  std::vector<float> out((row1 - row0) * (col1 - col0));
  const unsigned char* base = data_ + t.begin;
  for (std::size_t r = row0; r < row1; ++r)
    std::memcpy(out.data() + (r - row0) * (col1 - col0), base + (r * cols + col0) * sizeof(float),
                (col1 - col0) * sizeof(float));
  return out;
}

std::vector<float> SafetensorsFile::all(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<float> out((t.end - t.begin) / sizeof(float));
  std::memcpy(out.data(), data_ + t.begin, t.end - t.begin);
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::size_t offset = 0;
  for (const auto& t : tensors) {
    std::size_t count = 1;
    for (auto d : t.shape) count *= d;
    if (count != t.values.size())
      throw SafetensorsError(path + ": shape of '" + t.name + "' does not match its values");
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + count * sizeof(float)}}};
    offset += count * sizeof(float);
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h.push_back(' ');  // keep the data 8-byte aligned
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw SafetensorsError(path + ": cannot create: " + std::strerror(errno));
  unsigned char len[8];
  std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& t : tensors)
    f.write(reinterpret_cast<const char*>(t.values.data()),
            static_cast<std::streamsize>(t.values.size() * sizeof(float)));
  if (!f.flush()) throw SafetensorsError(path + ": write failed (disk full?)");
}

}  // namespace spark::example
