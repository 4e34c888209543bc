// Element types and reduction operators of libspark's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spark {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;
std::string_view to_string(DType dtype) noexcept;
std::string_view to_string(ReduceOp op) noexcept;

/// Parses "f32", "float", "bf16", ... and "sum", "max", ...; throws spark::InvalidUsage naming
/// the accepted spellings.
DType parse_dtype(std::string_view name);
ReduceOp parse_reduce_op(std::string_view name);

}  // namespace spark
