// Element-wise reductions in a fixed input order (inputs[0] op inputs[1] op ... ), so every
// rank computes bit-identical results. f16/bf16 accumulate in float and round once at the end;
// integers wrap around.
#pragma once

#include <cstddef>
#include <cstdint>

#include "spark/types.hpp"

namespace spark::coll {

/// out[i] = inputs[0][i] op ... op inputs[n-1][i] (avg: the sum divided by n). `out` may alias
/// any input (each block of elements is read completely before it is written).
void reduce_n(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
              ReduceOp op);

float f16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_f16(float f) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;

}  // namespace spark::coll
