// Element-wise reduction of N inputs in fixed rank order, written once for the GPU kernels and
// the host reference. The order (input 0, then 1, ... then N-1) and the arithmetic (see below)
// are part of the contract: every rank computes bit-identical results, and a GPU result equals
// the host reference bit for bit.
//
// Arithmetic, per dtype:
//   f32, f64     accumulate in the type itself: ((x0 op x1) op x2) ...; avg = sum / N.
//   f16, bf16    widen exactly to float, accumulate in float, round once to nearest even at
//                the end (own conversion code, identical on host and GPU).
//   min / max    floating: NaN propagates (the first NaN in rank order wins); else the first of
//                equal values is kept (so -0 vs +0 depends on rank order, deterministically).
//   i32, i64, u8 sum and prod wrap modulo 2^bits (two's complement, defined behaviour);
//                avg = exact sum / N truncated toward zero (i64: the wrapped sum / N).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "spark/kernels/hd.hpp"
#include "spark/types.hpp"

namespace spark::kernels {

/// IEEE binary16 and bfloat16 as plain 16-bit storage (no dependency on cuda_fp16.h, so the
/// host reference compiles with plain g++). Bit-compatible with __half and __nv_bfloat16.
struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

SPARK_HD inline float bits_to_float(std::uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
SPARK_HD inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

SPARK_HD inline float half_to_float(Half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  std::uint32_t e = (h.bits >> 10) & 0x1fu;
  std::uint32_t m = h.bits & 0x3ffu;
  if (e == 0) {
    if (m == 0) return bits_to_float(sign);
    e = 113;  // subnormal: normalise; 2^-14 has float exponent 113
    while ((m & 0x400u) == 0) {
      m <<= 1;
      --e;
    }
    return bits_to_float(sign | (e << 23) | ((m & 0x3ffu) << 13));
  }
  if (e == 31) return bits_to_float(sign | 0x7f800000u | (m << 13));
  return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
}

/// Round to nearest, ties to even; overflow to infinity; NaN stays NaN (quiet, sign kept).
SPARK_HD inline Half float_to_half(float f) {
  const std::uint32_t x = float_to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)
    return Half{static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu))};
  if (ax >= 0x477ff000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65520
  if (ax <= 0x33000000u) return Half{sign};  // <= 2^-25 rounds to zero (2^-25 is a tie -> even 0)
  const std::uint32_t e = ax >> 23;
  if (e < 113) {  // half subnormal: value / 2^-24 = m * 2^(e - 126)
    const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14..24
    std::uint32_t r = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return Half{static_cast<std::uint16_t>(sign | r)};
  }
  const std::uint32_t mant = ax & 0x7fffffu;
  std::uint32_t h = ((e - 112) << 10) | (mant >> 13);
  const std::uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
  return Half{static_cast<std::uint16_t>(sign | h)};
}

SPARK_HD inline float bf16_to_float(BFloat16 b) {
  return bits_to_float(static_cast<std::uint32_t>(b.bits) << 16);
}

SPARK_HD inline BFloat16 float_to_bf16(float f) {
  const std::uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return BFloat16{static_cast<std::uint16_t>((x >> 16) | 0x40u)};
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>(rounded >> 16)};
}

/// How each storage type is widened, accumulated and narrowed.
template <class T>
struct FloatTraits;
template <>
struct FloatTraits<float> {
  using Acc = float;
  SPARK_HD static float widen(float v) { return v; }
  SPARK_HD static float narrow(float v) { return v; }
};
template <>
struct FloatTraits<double> {
  using Acc = double;
  SPARK_HD static double widen(double v) { return v; }
  SPARK_HD static double narrow(double v) { return v; }
};
template <>
struct FloatTraits<Half> {
  using Acc = float;
  SPARK_HD static float widen(Half v) { return half_to_float(v); }
  SPARK_HD static Half narrow(float v) { return float_to_half(v); }
};
template <>
struct FloatTraits<BFloat16> {
  using Acc = float;
  SPARK_HD static float widen(BFloat16 v) { return bf16_to_float(v); }
  SPARK_HD static BFloat16 narrow(float v) { return float_to_bf16(v); }
};

template <class T>
inline constexpr bool is_float_like = false;
template <>
inline constexpr bool is_float_like<float> = true;
template <>
inline constexpr bool is_float_like<double> = true;
template <>
inline constexpr bool is_float_like<Half> = true;
template <>
inline constexpr bool is_float_like<BFloat16> = true;

/// Reduces element i of n inputs: in(r) returns input r's element, r = 0 .. n-1 in this order.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class T, class In>
SPARK_HD T reduce_element(ReduceOp op, int n, In in) {
  if constexpr (is_float_like<T>) {
    using Tr = FloatTraits<T>;
    using A = typename Tr::Acc;
    A acc = Tr::widen(in(0));
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        for (int r = 1; r < n; ++r) acc = acc + Tr::widen(in(r));
        if (op == ReduceOp::avg) acc = acc / static_cast<A>(n);
        break;
      case ReduceOp::prod:
        for (int r = 1; r < n; ++r) acc = acc * Tr::widen(in(r));
        break;
      case ReduceOp::min:
      case ReduceOp::max:
        for (int r = 1; r < n; ++r) {
          const A v = Tr::widen(in(r));
          if (acc != acc) break;  // NaN already: it propagates
          if (v != v || (op == ReduceOp::min ? v < acc : acc < v)) acc = v;
        }
        break;
    }
    return Tr::narrow(acc);
  } else {
    // Integers: wrap-around arithmetic in uint64 (defined), exact signed sum for avg.
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::prod: {
        std::uint64_t acc = static_cast<std::uint64_t>(in(0));
        for (int r = 1; r < n; ++r) {
          const std::uint64_t v = static_cast<std::uint64_t>(in(r));
          acc = op == ReduceOp::sum ? acc + v : acc * v;
        }
        return static_cast<T>(acc);  // modular narrowing (C++20)
      }
      case ReduceOp::min:
      case ReduceOp::max: {
        T acc = in(0);
        for (int r = 1; r < n; ++r) {
          const T v = in(r);
          if (op == ReduceOp::min ? v < acc : acc < v) acc = v;
        }
        return acc;
      }
      case ReduceOp::avg:
      default: {
        std::uint64_t acc = static_cast<std::uint64_t>(static_cast<std::int64_t>(in(0)));
        for (int r = 1; r < n; ++r)
          acc += static_cast<std::uint64_t>(static_cast<std::int64_t>(in(r)));
        return static_cast<T>(static_cast<std::int64_t>(acc) / static_cast<std::int64_t>(n));
      }
    }
  }
}

/// The storage type of each DType, for dispatch: visit_dtype(d, f) calls f(T{}) (host code).
template <class F>
auto visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32:
      return f(float{});
    case DType::f64:
      return f(double{});
    case DType::f16:
      return f(Half{});
    case DType::bf16:
      return f(BFloat16{});
    case DType::i32:
      return f(std::int32_t{});
    case DType::i64:
      return f(std::int64_t{});
    case DType::u8:
    default:
      return f(std::uint8_t{});
  }
}

SPARK_HD inline std::size_t element_size(DType d) {
  switch (d) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
    default:
      return 1;
  }
}

/// Host reference: out[i] = reduce of inputs[0..n-1][i] in rank order. out may alias an input.
template <class T>
void reduce_reference_typed(ReduceOp op, const T* const* inputs, int n, T* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = reduce_element<T>(op, n, [&](int r) { return inputs[r][i]; });
  }
}

inline void reduce_reference(DType dtype, ReduceOp op, const void* const* inputs, int n, void* out,
                             std::size_t count) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    reduce_reference_typed<T>(op, reinterpret_cast<const T* const*>(inputs), n,
                              static_cast<T*>(out), count);
  });
}

}  // namespace spark::kernels
