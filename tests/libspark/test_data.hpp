// Deterministic test inputs per (rank, salt) and the reference reduction (fold in rank order).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "spark/types.hpp"

namespace spark::test {

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                       DType::i32, DType::i64, DType::u8};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                       ReduceOp::avg};

/// Values chosen so that the order of a floating-point fold matters (mixed magnitudes and
/// signs), while prod stays finite.
inline double value(int rank, std::size_t i, int salt, ReduceOp op) {
  const auto k =
      static_cast<long>(
          (i * 7 + static_cast<std::size_t>(rank) * 13 + static_cast<std::size_t>(salt) * 5) % 17) -
      8;
  if (op == ReduceOp::prod) return 1.0 + static_cast<double>(k) / 64.0;
  const double scale = (rank + static_cast<int>(i)) % 3 == 0 ? 1000.0 : 0.0625;
  return static_cast<double>(k) * scale + static_cast<double>(rank);
}

/// u8 inputs are the magnitudes (the values above may be negative).
inline void store(std::byte* p, DType dt, double v) {
  store_value(p, dt, dt == DType::u8 ? std::fabs(v) : v);
}

inline std::vector<std::byte> gen(DType dt, int rank, int salt, std::size_t count,
                                  ReduceOp op = ReduceOp::sum) {
  const std::size_t es = dtype_size(dt);
  std::vector<std::byte> v(count * es);
  for (std::size_t i = 0; i < count; ++i) store(v.data() + i * es, dt, value(rank, i, salt, op));
  return v;
}

/// Reference: every rank's input (gen) folded in rank order.
inline std::vector<std::byte> reference(DType dt, ReduceOp op, int size, int salt,
                                        std::size_t count) {
  std::vector<std::vector<std::byte>> in;
  std::vector<const void*> ptrs;
  for (int r = 0; r < size; ++r) in.push_back(gen(dt, r, salt, count, op));
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<std::byte> out(count * dtype_size(dt));
  if (count > 0) reduce_local(out.data(), ptrs.data(), size, count, dt, op);
  return out;
}

inline std::uint64_t fnv(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

}  // namespace spark::test
