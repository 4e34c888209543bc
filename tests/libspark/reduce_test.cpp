// Unit tests of the reduction kernels and the half-precision conversions (host only).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "coll/call_desc.hpp"
#include "coll/reduce.hpp"
#include "spark/spark.hpp"

namespace spark::coll {
namespace {

template <class T>
std::vector<T> run(DType dt, ReduceOp op, std::vector<std::vector<T>> in) {
  std::vector<const void*> p;
  for (auto& v : in) p.push_back(v.data());
  std::vector<T> out(in[0].size());
  reduce_n(out.data(), p.data(), static_cast<int>(p.size()), out.size(), dt, op);
  return out;
}

TEST(Reduce, EveryOpOnIntegersAndFloats) {
  EXPECT_EQ(run<std::int32_t>(DType::i32, ReduceOp::sum, {{1, -5}, {2, 7}, {3, 1}}),
            (std::vector<std::int32_t>{6, 3}));
  EXPECT_EQ(run<std::int32_t>(DType::i32, ReduceOp::prod, {{2, -5}, {3, 7}}),
            (std::vector<std::int32_t>{6, -35}));
  EXPECT_EQ(run<std::int64_t>(DType::i64, ReduceOp::min, {{2, -5}, {3, 7}}),
            (std::vector<std::int64_t>{2, -5}));
  EXPECT_EQ(run<std::int64_t>(DType::i64, ReduceOp::max, {{2, -5}, {3, 7}}),
            (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(run<std::int32_t>(DType::i32, ReduceOp::avg, {{2, -5}, {4, 8}}),
            (std::vector<std::int32_t>{3, 1}));
  EXPECT_EQ(run<std::uint8_t>(DType::u8, ReduceOp::sum, {{200}, {100}}),
            (std::vector<std::uint8_t>{44}));  // wraps
  EXPECT_EQ(run<std::uint8_t>(DType::u8, ReduceOp::avg, {{200}, {100}}),
            (std::vector<std::uint8_t>{150}));
  EXPECT_EQ(run<float>(DType::f32, ReduceOp::avg, {{1.0f}, {2.0f}}), (std::vector<float>{1.5f}));
  EXPECT_EQ(run<double>(DType::f64, ReduceOp::prod, {{1.5}, {-2.0}}), (std::vector<double>{-3.0}));
  // Integer overflow wraps instead of being undefined.
  EXPECT_EQ(run<std::int32_t>(DType::i32, ReduceOp::sum,
                              {{std::numeric_limits<std::int32_t>::max()}, {1}}),
            (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min()}));
}

TEST(Reduce, FoldsInInputOrder) {
  // ((1e8 + 1) - 1e8) + 1 == 1 in float; any other order gives 0 or 2.
  EXPECT_EQ(run<float>(DType::f32, ReduceOp::sum, {{1e8f}, {1.0f}, {-1e8f}, {1.0f}}),
            (std::vector<float>{1.0f}));
  EXPECT_EQ(run<float>(DType::f32, ReduceOp::sum, {{1.0f}, {1.0f}, {1e8f}, {-1e8f}}),
            (std::vector<float>{0.0f}));
}

TEST(Reduce, OutputMayAliasAnyInput) {
  for (int alias = 0; alias < 3; ++alias) {
    std::vector<std::vector<float>> in = {std::vector<float>(3000, 1.0f),
                                          std::vector<float>(3000, 2.0f),
                                          std::vector<float>(3000, 4.0f)};
    std::vector<const void*> p = {in[0].data(), in[1].data(), in[2].data()};
    reduce_n(in[static_cast<std::size_t>(alias)].data(), p.data(), 3, 3000, DType::f32,
             ReduceOp::sum);
    for (float v : in[static_cast<std::size_t>(alias)]) ASSERT_EQ(v, 7.0f) << "alias " << alias;
  }
}

// The one-pass float folds (2 inputs; 3 inputs: reduce_three's vectors), not avg, on every level,
// against a plain scalar fold in rank order, bit for bit: NaN, infinities, signed zeros, sizes
// around the vector width, the output aliasing each input.
template <class T>
void direct_matches_scalar_fold(DType dt) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const T special[] = {nan, inf, -inf, T(0), -T(0), T(1), T(-2.5), T(1e30), T(-1e-30), T(3)};
  for (int n : {2, 3})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max})
      for (std::size_t count : {1u, 15u, 16u, 17u, 37u, 1000u})
        for (int alias = -1; alias < n; ++alias) {
          std::vector<std::vector<T>> in(static_cast<std::size_t>(n), std::vector<T>(count));
          for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i)
              in[static_cast<std::size_t>(r)][i] =
                  special[(i * 7 + static_cast<std::size_t>(r) * 3 + i / 10) % 10];
          std::vector<T> want(count);
          for (std::size_t i = 0; i < count; ++i) {
            T acc = in[0][i];
            for (int r = 1; r < n; ++r) {
              const T x = in[static_cast<std::size_t>(r)][i];
              if (op == ReduceOp::sum)
                acc = acc + x;
              else if (op == ReduceOp::prod)
                acc = acc * x;
              else if (op == ReduceOp::min)
                acc = x < acc ? x : acc;
              else
                acc = x > acc ? x : acc;
            }
            want[i] = acc;
          }
          for (const auto& [isa, fold] : runnable_folds()) {
            auto inputs = in;  // the output may alias one of them
            std::vector<const void*> p;
            for (auto& v : inputs) p.push_back(v.data());
            std::vector<T> separate(count);
            T* out = alias < 0 ? separate.data() : inputs[static_cast<std::size_t>(alias)].data();
            fold(out, p.data(), n, count, dt, op);
            ASSERT_EQ(std::memcmp(out, want.data(), count * sizeof(T)), 0)
                << cpu_isa_name(isa) << ": n " << n << " op " << static_cast<int>(op) << " count "
                << count << " alias " << alias;
          }
        }
}

TEST(Reduce, OnePassFloatFoldsAreTheScalarFold) {
  direct_matches_scalar_fold<float>(DType::f32);
  direct_matches_scalar_fold<double>(DType::f64);
}

bool is_nan(DType dt, const std::uint8_t* e) {
  std::uint64_t b = 0;
  std::memcpy(&b, e, dtype_size(dt));
  switch (dt) {
    case DType::f32:
      return (b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu) != 0;
    case DType::f64:
      return (b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (b & 0xfffffffffffffull) != 0;
    case DType::f16:
      return (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    case DType::bf16:
      return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    default:
      return false;
  }
}

// Every runnable level's fold of `inputs` gives the baseline's bytes, element by element,
// except where both are NaN (see below).
testing::AssertionResult same_as_baseline(const std::vector<std::pair<CpuIsa, FoldFn>>& folds,
                                          const void* const* inputs, int n, std::size_t count,
                                          DType dt, ReduceOp op) {
  const std::size_t es = dtype_size(dt);
  std::vector<std::uint8_t> want(count * es), got(count * es);
  folds.back().second(want.data(), inputs, n, count, dt, op);
  for (const auto& [isa, fold] : folds) {
    fold(got.data(), inputs, n, count, dt, op);
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint8_t* g = got.data() + i * es;
      const std::uint8_t* w = want.data() + i * es;
      if (is_nan(dt, g) && is_nan(dt, w)) continue;
      if (std::memcmp(g, w, es) != 0)
        return testing::AssertionFailure() << cpu_isa_name(isa) << " vs baseline: " << to_string(dt)
                                           << " " << to_string(op) << " element " << i;
    }
  }
  return testing::AssertionSuccess();
}

// Every level built for this CPU (x86-64: AVX-512, AVX2, baseline) against the baseline, bit
// for bit, on every type and op, 1-5 inputs, lengths around each vector width and a block: a
// job whose ranks run on CPUs of different levels gets the same numbers on every rank. Except
// a NaN's sign and payload where an element meets two NaNs: x86 keeps the first operand's,
// and the compiler may swap the operands of an add or a multiply (it does in the AVX-512
// 3-input fold); a NaN stays a NaN on every rank.
TEST(Reduce, EveryLevelGivesTheBaselinesBits) {
  const auto folds = runnable_folds();
  if (folds.size() < 2) GTEST_SKIP() << "only the baseline level runs on this CPU";
  ASSERT_EQ(folds.back().first, CpuIsa::baseline);
  std::uint64_t rng = 0x2545f4914f6cdd1dull;
  auto next = [&rng] {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    const std::size_t es = dtype_size(dt);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg})
      for (int n = 1; n <= 5; ++n)
        for (std::size_t count : {1u, 7u, 15u, 16u, 33u, 64u, 1000u, 2500u}) {
          std::vector<std::vector<std::uint8_t>> in(static_cast<std::size_t>(n),
                                                    std::vector<std::uint8_t>(count * es));
          for (auto& v : in)
            for (std::size_t i = 0; i < count; ++i) {
              // Floats: a quarter NaNs of either sign and two payloads, infinities, signed
              // zeros and subnormals (so that one element often meets two NaNs: which one a
              // fold keeps must not depend on the level), the rest ordinary values of mixed
              // sign and magnitude; integers: raw bits.
              std::uint64_t bits = next();
              const std::uint64_t pick = bits >> 61;
              if (dt == DType::f32 && bits % 4 == 0) {
                const std::uint32_t sp[] = {0x7fc00001u, 0xffc00002u, 0x7f800000u, 0xff800000u,
                                            0x80000000u, 0x00000001u, 0x7fc00003u, 0xffc00000u};
                bits = sp[pick];
              } else if (dt == DType::f64 && bits % 4 == 0) {
                const std::uint64_t sp[] = {0x7ff8000000000001ull, 0xfff8000000000002ull,
                                            0x7ff0000000000000ull, 0xfff0000000000000ull,
                                            0x8000000000000000ull, 0x0000000000000001ull,
                                            0x7ff8000000000003ull, 0xfff8000000000000ull};
                bits = sp[pick];
              } else if ((dt == DType::f16 || dt == DType::bf16) && bits % 4 == 0) {
                const std::uint16_t f16[] = {0x7e01, 0xfe02, 0x7c00, 0xfc00,
                                             0x8000, 0x0001, 0x7e03, 0xfe00};
                const std::uint16_t bf16[] = {0x7fc1, 0xffc2, 0x7f80, 0xff80,
                                              0x8000, 0x0001, 0x7fc3, 0xffc0};
                bits = dt == DType::f16 ? f16[pick] : bf16[pick];
              } else if (dt == DType::f32) {
                const float f = static_cast<float>(static_cast<std::int64_t>(bits) >> 40) /
                                static_cast<float>(1 + (bits & 0xff));
                std::memcpy(&bits, &f, sizeof f);
              } else if (dt == DType::f64) {
                const double d = static_cast<double>(static_cast<std::int64_t>(bits) >> 20) /
                                 static_cast<double>(1 + (bits & 0xffff));
                std::memcpy(&bits, &d, sizeof d);
              }
              std::memcpy(v.data() + i * es, &bits, es);
            }
          std::vector<const void*> p;
          for (auto& v : in) p.push_back(v.data());
          ASSERT_TRUE(same_as_baseline(folds, p.data(), n, count, dt, op))
              << "n " << n << " count " << count;
        }
  }
}

// The wider levels convert halves in hardware (F16C): every f16 and bf16 value, folded with a
// few partners, must round as the baseline's code does.
TEST(Reduce, EveryLevelRoundsEveryHalfAsTheBaseline) {
  const auto folds = runnable_folds();
  if (folds.size() < 2) GTEST_SKIP() << "only the baseline level runs on this CPU";
  std::vector<std::uint16_t> every(0x10000);
  for (std::uint32_t i = 0; i < 0x10000; ++i) every[i] = static_cast<std::uint16_t>(i);
  for (DType dt : {DType::f16, DType::bf16})
    for (std::uint16_t partner : {0x0000, 0x3c00, 0x0001, 0x3555, 0xbc01, 0x7bff, 0x0400, 0x8401})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
        const std::vector<std::uint16_t> other(every.size(), partner);
        const void* in[] = {every.data(), other.data()};
        ASSERT_TRUE(same_as_baseline(folds, in, 2, every.size(), dt, op))
            << "(an element's index is its half's bits), partner 0x" << std::hex << partner;
      }
}

// SPARK_MAX_CPU_ISA caps the level reduce_n runs; auto is the widest this CPU has.
TEST(Reduce, MaxCpuIsaCapsTheLevel) {
  const auto folds = runnable_folds();
  EXPECT_EQ(limit_fold_isa(*cpu_isa_from_word("baseline")), CpuIsa::baseline);
  EXPECT_EQ(fold_isa(), CpuIsa::baseline);
  EXPECT_EQ(run<float>(DType::f32, ReduceOp::sum, {{1.5f}, {2.0f}}), (std::vector<float>{3.5f}));
  EXPECT_LE(limit_fold_isa(*cpu_isa_from_word("x86-64-v3")), CpuIsa::x86_64_v3);
  EXPECT_EQ(limit_fold_isa(*cpu_isa_from_word("auto")), folds.front().first);
  EXPECT_EQ(fold_isa(), folds.front().first);
  EXPECT_EQ(cpu_isa_name(CpuIsa::x86_64_v4), "x86-64-v4");
  EXPECT_FALSE(cpu_isa_from_word("avx512"));
}

// ... and a communicator passes the variable on when it is built (a one-rank job here).
TEST(Reduce, ACommunicatorAppliesSparkMaxCpuIsa) {
  ::setenv("SPARK_MAX_CPU_ISA", "baseline", 1);
  {
    Communicator comm = init();
    EXPECT_EQ(fold_isa(), CpuIsa::baseline);
  }
  ::setenv("SPARK_MAX_CPU_ISA", "auto", 1);
  {
    Communicator comm = init();
    EXPECT_EQ(fold_isa(), runnable_folds().front().first);
  }
  ::unsetenv("SPARK_MAX_CPU_ISA");
}

TEST(Reduce, HalfPrecisionAccumulatesInFloatAndRoundsOnce) {
  // bf16: 256 + 1 + 1 = 258 exactly in float, representable in bf16; pairwise bf16 rounding
  // would give 256 (256+1 rounds back to 256 in bf16).
  auto b = [](float f) { return float_to_bf16(f); };
  auto out = run<std::uint16_t>(DType::bf16, ReduceOp::sum, {{b(256)}, {b(1)}, {b(1)}});
  EXPECT_EQ(bf16_to_float(out[0]), 258.0f);
  auto h = [](float f) { return float_to_f16(f); };
  auto o2 = run<std::uint16_t>(DType::f16, ReduceOp::avg, {{h(1.0f)}, {h(2.0f)}});
  EXPECT_EQ(f16_to_float(o2[0]), 1.5f);
}

TEST(Convert, F16RoundTripsEveryValue) {
  for (std::uint32_t i = 0; i < 0x10000; ++i) {
    const auto x = static_cast<std::uint16_t>(i);
    const float f = f16_to_float(x);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), x) << std::hex << i;
  }
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);            // rounds to infinity
  EXPECT_EQ(float_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // tie to even
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
}

// Halfway between two neighbouring halves a float rounds to the one with the even mantissa,
// and just off halfway to the nearer: on every CPU (aarch64 converts in hardware).
TEST(Convert, F16RoundsEveryHalfwayFloatToEven) {
  for (std::uint32_t i = 0; i < 0x7bff; ++i) {  // positive finite halves and their next
    for (const std::uint32_t sign : {0x0000u, 0x8000u}) {
      const auto lo = static_cast<std::uint16_t>(i | sign);
      const auto hi = static_cast<std::uint16_t>((i + 1) | sign);
      const float a = f16_to_float(lo), b = f16_to_float(hi);
      const float mid = a + (b - a) / 2;  // exact: halves have 11 significant bits
      ASSERT_EQ(float_to_f16(mid), (i % 2 == 0) ? lo : hi) << std::hex << lo;
      ASSERT_EQ(float_to_f16(std::nextafter(mid, a)), lo) << std::hex << lo;
      ASSERT_EQ(float_to_f16(std::nextafter(mid, b)), hi) << std::hex << lo;
    }
  }
}

TEST(Convert, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(CallDesc, NamesCalls) {
  CallDesc d;
  d.coll = Coll::broadcast;
  d.dtype = static_cast<std::uint8_t>(DType::f32);
  d.root = 2;
  d.count = 8;
  EXPECT_EQ(describe(d), "broadcast(f32, count 8, root 2)");
  d.coll = Coll::allreduce;
  d.op = static_cast<std::uint8_t>(ReduceOp::max);
  EXPECT_EQ(describe(d), "allreduce(f32, max, count 8)");
}

}  // namespace
}  // namespace spark::coll
