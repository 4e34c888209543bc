// Element-wise reductions in a fixed input order (inputs[0] op inputs[1] op ... ), so every
// rank computes bit-identical results. f16/bf16 accumulate in float and round once at the end;
// integers wrap around. The folds are compiled once per instruction-set level (fold.hpp);
// every level gives the same bits (no reassociation, no contraction into FMA), so ranks on
// CPUs of different levels still agree, except in a NaN's sign and payload (a NaN stays a NaN;
// docs/collectives.md, "Folds per instruction-set level").
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "coll/fold.hpp"
#include "spark/protocol/cpu_isa.hpp"
#include "spark/types.hpp"

namespace spark::coll {

/// out[i] = inputs[0][i] op ... op inputs[n-1][i] (avg: the sum divided by n). `out` may alias
/// any input (each block of elements is read completely before it is written).
void reduce_n(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
              ReduceOp op);

/// From now on reduce_n runs the widest level this CPU has that is not above `cap`; returns it.
CpuIsa limit_fold_isa(CpuIsa cap) noexcept;
/// The level reduce_n runs.
CpuIsa fold_isa() noexcept;
/// Every level built into libspark that this CPU runs, widest first, with its fold (tests).
std::vector<std::pair<CpuIsa, FoldFn>> runnable_folds();

// The half-precision conversions: the baseline copy's (fold.hpp).
using baseline::bf16_to_float;
using baseline::f16_to_float;
using baseline::float_to_bf16;
using baseline::float_to_f16;

}  // namespace spark::coll
