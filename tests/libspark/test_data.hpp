// Deterministic test inputs per (rank, salt) and the reference reduction (fold in rank order).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "coll/reduce.hpp"
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

inline void store(std::byte* p, DType dt, double v) {
  switch (dt) {
    case DType::f32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::f64:
      std::memcpy(p, &v, 8);
      break;
    case DType::f16: {
      auto x = coll::float_to_f16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::bf16: {
      auto x = coll::float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::i32: {
      auto x = static_cast<std::int32_t>(std::lround(v));
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::i64: {
      auto x = static_cast<std::int64_t>(std::llround(v));
      std::memcpy(p, &x, 8);
      break;
    }
    case DType::u8: {
      auto x = static_cast<std::uint8_t>(std::lround(std::fabs(v)));
      *p = static_cast<std::byte>(x);
      break;
    }
  }
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
  if (count > 0) coll::reduce_n(out.data(), ptrs.data(), size, count, dt, op);
  return out;
}

inline std::uint64_t fnv(const void* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  return h;
}

}  // namespace spark::test
