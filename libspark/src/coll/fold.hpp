// The copies of the folds, one per instruction-set level (fold.cpp, compiled once per level).
// reduce_n (reduce.hpp) runs the widest copy this CPU has, up to SPARK_MAX_CPU_ISA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "spark/types.hpp"

namespace spark::coll {

/// out[i] = inputs[0][i] op ... op inputs[n-1][i]: reduce_n's contract.
using FoldFn = void (*)(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
                        ReduceOp op);

// Every copy has its own conversions too (its folds inline them); only the baseline's are
// exported, for the rest of libspark (reduce.hpp).
namespace baseline {
void fold(void* out, const void* const* inputs, int n, std::size_t count, DType dtype, ReduceOp op);
float f16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_f16(float f) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;
}  // namespace baseline
namespace x86v3 {  // x86-64-v3: AVX2, FMA (not contracted: -ffp-contract=off), BMI2
void fold(void* out, const void* const* inputs, int n, std::size_t count, DType dtype, ReduceOp op);
}
namespace x86v4 {  // x86-64-v4: AVX-512 F, BW, CD, DQ, VL
void fold(void* out, const void* const* inputs, int n, std::size_t count, DType dtype, ReduceOp op);
}

}  // namespace spark::coll
