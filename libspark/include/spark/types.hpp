// Element types and reduction operators of libspark's collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spark {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8 };
enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };
/// Allreduce algorithm (automatic picks by size and, on one node, by the ranks' timings of the
/// paths: coll/copy_tuner.hpp; the others are for measurements). single_copy falls back to the
/// slots (one-shot or two-phase) where a rank cannot reach every peer's memory.
enum class AllreduceAlgo : std::uint8_t { automatic, one_shot, two_phase, single_copy };

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;
std::string_view to_string(DType dtype) noexcept;
std::string_view to_string(ReduceOp op) noexcept;

/// Parses "f32", "float", "bf16", ... and "sum", "max", ...; throws spark::InvalidUsage naming
/// the accepted spellings.
DType parse_dtype(std::string_view name);
ReduceOp parse_reduce_op(std::string_view name);

/// One element of `dtype` at `dst` holding `value` (floats rounded to nearest; integers
/// rounded to nearest and wrapped): test and benchmark inputs.
void store_value(void* dst, DType dtype, double value) noexcept;
/// The reduction the collectives apply, for checking their results bit for bit:
/// out[i] = inputs[0][i] op ... op inputs[n-1][i] in this order (avg: the sum divided by n;
/// f16/bf16 accumulate in float and round once). `out` may alias an input.
void reduce_local(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
                  ReduceOp op);

}  // namespace spark
