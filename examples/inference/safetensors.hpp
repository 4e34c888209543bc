// A small safetensors reader and writer (float32 only): 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace spark::example {

struct SafetensorsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TensorInfo {
  std::vector<std::size_t> shape;
  std::size_t begin = 0;  // byte offsets into the data section
  std::size_t end = 0;
};

/// Maps the file read-only and validates the header: every tensor is F32, its offsets lie in
/// the data section, its byte size matches its shape, and no two tensors overlap.
/// Errors name the file and the problem (SafetensorsError).
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorInfo& info(const std::string& name) const;
  /// Rows [row0, row1) and columns [col0, col1) of a 1-D (one row) or 2-D tensor, row-major.
  std::vector<float> slice(const std::string& name, std::size_t row0, std::size_t row1,
                           std::size_t col0, std::size_t col1) const;
  /// The whole tensor.
  std::vector<float> all(const std::string& name) const;

 private:
  std::string path_;
  const unsigned char* map_ = nullptr;
  std::size_t size_ = 0;
  const unsigned char* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> values;
};

/// Writes tensors (F32) and string metadata in the safetensors format.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace spark::example
