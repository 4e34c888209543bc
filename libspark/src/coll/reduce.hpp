// Element-wise reductions in a fixed input order (inputs[0] op inputs[1] op ... ), so every
// rank computes bit-identical results. f16/bf16 accumulate in float and round once at the end;
// integers wrap around. The folds are compiled once per instruction-set level (fold.hpp);
// every level gives the same bits (no reassociation, no contraction into FMA), so ranks on
// CPUs of different levels still agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "coll/fold.hpp"
#include "spark/types.hpp"

namespace spark::coll {

/// out[i] = inputs[0][i] op ... op inputs[n-1][i] (avg: the sum divided by n). `out` may alias
/// any input (each block of elements is read completely before it is written).
void reduce_n(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
              ReduceOp op);

/// The instruction-set levels the folds are built for, narrowest first: X(enumerator, name).
/// SPARK_MAX_CPU_ISA's words are "auto" and these names (config/knobs.cpp).
#define SPARK_CPU_ISAS(X) \
  X(baseline, "baseline") X(x86_64_v3, "x86-64-v3") X(x86_64_v4, "x86-64-v4")
#define SPARK_CPU_ISA_ENUMERATOR(e, name) e,
enum class CpuIsa { SPARK_CPU_ISAS(SPARK_CPU_ISA_ENUMERATOR) };
#undef SPARK_CPU_ISA_ENUMERATOR

std::string_view cpu_isa_name(CpuIsa isa) noexcept;
/// SPARK_MAX_CPU_ISA's value: "auto" (the widest built) or a name; throws on any other word.
CpuIsa parse_cpu_isa(std::string_view text);
/// From now on reduce_n runs the widest level this CPU has that is not above `cap`; returns it.
CpuIsa limit_fold_isa(CpuIsa cap) noexcept;
/// The level reduce_n runs.
CpuIsa fold_isa() noexcept;
/// Every level built into libspark that this CPU runs, widest first, with its fold (tests).
std::vector<std::pair<CpuIsa, FoldFn>> runnable_folds();

float f16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_f16(float f) noexcept;
float bf16_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;

}  // namespace spark::coll
