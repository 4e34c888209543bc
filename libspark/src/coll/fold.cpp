// The element-wise folds and the half-precision conversions they use, compiled once per
// instruction-set level (libspark/CMakeLists.txt): into libspark as it is built
// (SPARK_FOLD_ISA unset: `baseline`) and, on x86-64, again for x86-64-v3 and x86-64-v4.
// Every copy lives in a namespace named for its level, so no inline function or template
// instance compiled for a wider level can stand in for the baseline's at link time (the test
// fold_objects_define_only_their_level checks the objects); reduce.cpp picks the copy.
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "coll/fold.hpp"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#ifndef SPARK_FOLD_ISA
#define SPARK_FOLD_ISA baseline
#define SPARK_FOLD_EXPORTS_CONVERSIONS  // the rest of libspark calls the baseline's (reduce.hpp)
#endif

namespace spark::coll::SPARK_FOLD_ISA {

namespace {

// The conversions, with internal linkage so that the folds inline them: an exported function
// of a shared library may be interposed at load time, so the compiler calls it through the
// PLT instead (per element and per input, and never vectorized).
// Where the CPU converts halves itself (x86 F16C, part of x86-64-v3; every aarch64 core), that
// is used: exact both ways, rounding to nearest even as the code for other CPUs does, and
// 3-4x the f16 fold's speed on this host (scalar: GCC 12 does not vectorize the conversion). NaNs
// keep their payload there, where the code below makes them the default NaN: a NaN stays a NaN at
// every level (reduce_test).
float from_f16(std::uint16_t h) noexcept {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#elif defined(__aarch64__)
  return static_cast<float>(std::bit_cast<__fp16>(h));
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t e = (h >> 10) & 0x1f;
  const std::uint32_t m = h & 0x3ff;
  if (e == 0) {
    float v = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24, exact
    return sign != 0 ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
#endif
}

std::uint16_t to_f16(float f) noexcept {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#elif defined(__aarch64__)
  return std::bit_cast<std::uint16_t>(static_cast<__fp16>(f));
#else
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000);
  const std::uint32_t a = x & 0x7fffffff;
  if (a >= 0x7f800000) return sign | (a > 0x7f800000 ? 0x7e00 : 0x7c00);  // NaN, Inf
  if (a >= 0x477ff000) return sign | 0x7c00;                              // rounds to Inf
  if (a < 0x38800000) {  // f16 subnormal or zero: round(a * 2^24), ties to even
    const float v = std::bit_cast<float>(a) * 16777216.0f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(v));
  }
  std::uint32_t r = a - 0x38000000;  // rebias exponent 127 -> 15
  r += 0xfff + ((r >> 13) & 1);      // round to nearest even on the 13 dropped bits
  return sign | static_cast<std::uint16_t>(r >> 13);
#endif
}

float from_bf16(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000)
    return static_cast<std::uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace

#if defined(SPARK_FOLD_EXPORTS_CONVERSIONS)
float f16_to_float(std::uint16_t h) noexcept {
  return from_f16(h);
}
std::uint16_t float_to_f16(float f) noexcept {
  return to_f16(f);
}
float bf16_to_float(std::uint16_t h) noexcept {
  return from_bf16(h);
}
std::uint16_t float_to_bf16(float f) noexcept {
  return to_bf16(f);
}
#endif

namespace {

struct F16 {};
struct BF16 {};

// Storage type, accumulator type and conversions per element kind.
template <class K>
struct Traits {
  using S = K;
  using A = K;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};
template <>
struct Traits<F16> {
  using S = std::uint16_t;
  using A = float;
  static A load(S v) { return from_f16(v); }
  static S store(A v) { return to_f16(v); }
};
template <>
struct Traits<BF16> {
  using S = std::uint16_t;
  using A = float;
  static A load(S v) { return from_bf16(v); }
  static S store(A v) { return to_bf16(v); }
};
// Integers accumulate wide and wrap (unsigned arithmetic, no undefined overflow).
template <>
struct Traits<std::int32_t> {
  using S = std::int32_t;
  using A = std::int64_t;
  static A load(S v) { return v; }
  static S store(A v) { return static_cast<S>(v); }
};
template <>
struct Traits<std::uint8_t> {
  using S = std::uint8_t;
  using A = std::uint32_t;
  static A load(S v) { return v; }
  static S store(A v) { return static_cast<S>(v); }
};

template <class A>
A add(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) +
                          static_cast<std::make_unsigned_t<A>>(b));
  else
    return a + b;
}
template <class A>
A mul(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) *
                          static_cast<std::make_unsigned_t<A>>(b));
  else
    return a * b;
}

constexpr std::size_t kBlock = 1024;
// The widest vector of this copy's level: what reduce_three works in.
#if defined(__AVX512F__)
constexpr std::size_t kVectorBytes = 64;
#elif defined(__AVX2__)
constexpr std::size_t kVectorBytes = 32;
#else
constexpr std::size_t kVectorBytes = 16;
#endif

template <ReduceOp OP, class A>
A combine(A acc, A x) {
  if constexpr (OP == ReduceOp::sum || OP == ReduceOp::avg)
    return add(acc, x);
  else if constexpr (OP == ReduceOp::prod)
    return mul(acc, x);
  else if constexpr (OP == ReduceOp::min)
    return x < acc ? x : acc;
  else
    return x > acc ? x : acc;
}

// Three floating-point inputs (3 ranks of one node, e.g. the single copy's fold) without avg:
// one pass, a vector (kVectorBytes) at a time, all three inputs of an element read before its
// output is written (so `out` may be any input, as in place); the same operations in the same
// order as the block loop below, so the same bits. The block loop makes three passes over its
// accumulator here.
template <class S, ReduceOp OP>
void reduce_three(S* o, const S* a, const S* b, const S* c, std::size_t count) {
  typedef S V __attribute__((vector_size(kVectorBytes)));
  constexpr std::size_t kLanes = sizeof(V) / sizeof(S);
  std::size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    V x, y, z;
    std::memcpy(&x, a + i, sizeof x);
    std::memcpy(&y, b + i, sizeof y);
    std::memcpy(&z, c + i, sizeof z);
    const V r = combine<OP>(combine<OP>(x, y), z);
    std::memcpy(o + i, &r, sizeof r);
  }
  for (; i < count; ++i) o[i] = combine<OP>(combine<OP>(a[i], b[i]), c[i]);
}

// Folds inputs 0..n-1 element by element, in rank order (bit-identical on every rank). Inputs
// 0 and 1 are folded in one pass (a separate copy of input 0 into the accumulator cost ~20 %
// of a cold 8 MiB fold: it is the pass that reads the cold input); with two inputs the result
// goes straight to `out`. `out` may be one of the inputs (same elements), never a shifted one.
template <class K, ReduceOp OP>
void reduce_typed(void* out, const void* const* inputs, int n, std::size_t count) {
  using T = Traits<K>;
  using S = typename T::S;
  using A = typename T::A;
  const A div = static_cast<A>(n);
  auto finish = [div](A v) {
    if constexpr (OP == ReduceOp::avg)
      return v / div;
    else
      return v;
  };
  auto* o = static_cast<S*>(out);
  const S* in0 = static_cast<const S*>(inputs[0]);
  if (n == 1) {
    for (std::size_t i = 0; i < count; ++i) o[i] = T::store(finish(T::load(in0[i])));
    return;
  }
  const S* in1 = static_cast<const S*>(inputs[1]);
  if constexpr (std::is_floating_point_v<S> && OP != ReduceOp::avg) {
    if (n == 3) return reduce_three<S, OP>(o, in0, in1, static_cast<const S*>(inputs[2]), count);
  }
  if (n == 2) {
    for (std::size_t i = 0; i < count; ++i)
      o[i] = T::store(finish(combine<OP>(T::load(in0[i]), T::load(in1[i]))));
    return;
  }
  A acc[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t len = count - base < kBlock ? count - base : kBlock;
    for (std::size_t i = 0; i < len; ++i)
      acc[i] = combine<OP>(T::load(in0[base + i]), T::load(in1[base + i]));
    for (int r = 2; r < n; ++r) {
      const S* in = static_cast<const S*>(inputs[r]) + base;
      for (std::size_t i = 0; i < len; ++i) acc[i] = combine<OP>(acc[i], T::load(in[i]));
    }
    for (std::size_t i = 0; i < len; ++i) o[base + i] = T::store(finish(acc[i]));
  }
}

template <class K>
void reduce_op(void* out, const void* const* inputs, int n, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return reduce_typed<K, ReduceOp::sum>(out, inputs, n, count);
    case ReduceOp::prod:
      return reduce_typed<K, ReduceOp::prod>(out, inputs, n, count);
    case ReduceOp::min:
      return reduce_typed<K, ReduceOp::min>(out, inputs, n, count);
    case ReduceOp::max:
      return reduce_typed<K, ReduceOp::max>(out, inputs, n, count);
    case ReduceOp::avg:
      return reduce_typed<K, ReduceOp::avg>(out, inputs, n, count);
  }
}

}  // namespace

void fold(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
          ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return reduce_op<float>(out, inputs, n, count, op);
    case DType::f64:
      return reduce_op<double>(out, inputs, n, count, op);
    case DType::f16:
      return reduce_op<F16>(out, inputs, n, count, op);
    case DType::bf16:
      return reduce_op<BF16>(out, inputs, n, count, op);
    case DType::i32:
      return reduce_op<std::int32_t>(out, inputs, n, count, op);
    case DType::i64:
      return reduce_op<std::int64_t>(out, inputs, n, count, op);
    case DType::u8:
      return reduce_op<std::uint8_t>(out, inputs, n, count, op);
  }
}

}  // namespace spark::coll::SPARK_FOLD_ISA
