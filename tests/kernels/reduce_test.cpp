// Host tests of the reduction arithmetic (kernels/include/spark/kernels/reduce.hpp): the
// reference the GPU kernels are compared with bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "spark/kernels/reduce.hpp"

namespace sk = spark::kernels;
using spark::DType;
using spark::ReduceOp;

namespace {

std::uint32_t bits(float f) {
  return sk::float_to_bits(f);
}

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(sk::float_to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(sk::float_to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(sk::float_to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(sk::float_to_half(65519.0f).bits, 0x7bff);               // below the tie: stays finite
  EXPECT_EQ(sk::float_to_half(65520.0f).bits, 0x7c00);               // tie to even: infinity
  EXPECT_EQ(sk::float_to_half(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(sk::float_to_half(std::ldexp(1.0f, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(sk::float_to_half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie -> even (0)
  EXPECT_EQ(sk::float_to_half(std::ldexp(3.0f, -25)).bits, 0x0002);  // tie -> even (2)
  EXPECT_EQ(sk::float_to_half(std::ldexp(1.0f, -25) * 1.0001f).bits, 0x0001);
  EXPECT_EQ(sk::float_to_half(-0.0f).bits, 0x8000);
  EXPECT_EQ(sk::float_to_half(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(sk::float_to_half(1e10f).bits, 0x7c00);
  const sk::Half nan = sk::float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan.bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan.bits & 0x03ff, 0);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0); 1 + 3*2^-11 rounds up.
  EXPECT_EQ(sk::float_to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);
  EXPECT_EQ(sk::float_to_half(1.0f + std::ldexp(3.0f, -11)).bits, 0x3c02);
  EXPECT_EQ(bits(sk::half_to_float(sk::Half{0x0001})), bits(std::ldexp(1.0f, -24)));
  EXPECT_EQ(bits(sk::half_to_float(sk::Half{0x8000})), bits(-0.0f));
  EXPECT_TRUE(std::isinf(sk::half_to_float(sk::Half{0xfc00})));
  EXPECT_TRUE(std::isnan(sk::half_to_float(sk::Half{0x7e01})));
}

TEST(HalfConversion, EveryHalfRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = sk::half_to_float(sk::Half{static_cast<std::uint16_t>(h)});
    const std::uint16_t back = sk::float_to_half(f).bits;
    if (std::isnan(f)) {
      EXPECT_EQ(back & 0x7c00, 0x7c00) << h;
      EXPECT_NE(back & 0x3ff, 0) << h;
    } else {
      ASSERT_EQ(back, h) << "half 0x" << std::hex << h;
    }
  }
}

TEST(HalfConversion, MatchesDoubleRoundingOnMidpoints) {
  // Each float exactly halfway between two adjacent finite halves must round to the even one.
  for (std::uint32_t h = 0; h < 0x7bff; h += 7) {
    const double lo = sk::half_to_float(sk::Half{static_cast<std::uint16_t>(h)});
    const double hi = sk::half_to_float(sk::Half{static_cast<std::uint16_t>(h + 1)});
    const float mid = static_cast<float>((lo + hi) / 2);
    const std::uint16_t want = (h % 2 == 0) ? h : h + 1;
    ASSERT_EQ(sk::float_to_half(mid).bits, want) << "between 0x" << std::hex << h;
  }
}

TEST(BFloat16Conversion, KnownValuesAndRoundTrip) {
  EXPECT_EQ(sk::float_to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(sk::float_to_bf16(sk::bits_to_float(0x3f808000u)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(sk::float_to_bf16(sk::bits_to_float(0x3f818000u)).bits, 0x3f82);  // tie -> even
  EXPECT_EQ(sk::float_to_bf16(sk::bits_to_float(0x3f808001u)).bits, 0x3f81);
  EXPECT_EQ(sk::float_to_bf16(sk::bits_to_float(0x7f7fffffu)).bits, 0x7f80);  // overflow: inf
  EXPECT_TRUE(std::isnan(sk::bf16_to_float(sk::float_to_bf16(sk::bits_to_float(0x7f800001u)))));
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = sk::bf16_to_float(sk::BFloat16{static_cast<std::uint16_t>(b)});
    if (!std::isnan(f)) {
      ASSERT_EQ(sk::float_to_bf16(f).bits, b);
    }
  }
}

template <class T>
std::vector<T> reduce(ReduceOp op, const std::vector<std::vector<T>>& in) {
  std::vector<const T*> ptrs;
  for (auto& v : in) ptrs.push_back(v.data());
  std::vector<T> out(in[0].size());
  sk::reduce_reference_typed<T>(op, ptrs.data(), static_cast<int>(ptrs.size()), out.data(),
                                out.size());
  return out;
}

TEST(ReduceReference, FloatOps) {
  const std::vector<std::vector<float>> in = {{1, -2, 3.5f}, {4, 5, -1}, {0.5f, 8, 2}};
  EXPECT_EQ(reduce(ReduceOp::sum, in), (std::vector<float>{5.5f, 11, 4.5f}));
  EXPECT_EQ(reduce(ReduceOp::prod, in), (std::vector<float>{2, -80, -7}));
  EXPECT_EQ(reduce(ReduceOp::min, in), (std::vector<float>{0.5f, -2, -1}));
  EXPECT_EQ(reduce(ReduceOp::max, in), (std::vector<float>{4, 8, 3.5f}));
  EXPECT_EQ(reduce(ReduceOp::avg, in), (std::vector<float>{5.5f / 3, 11.0f / 3, 1.5f}));
}

TEST(ReduceReference, FixedRankOrderIsVisible) {
  // (1e8 + 1) + -1e8 = 0 in f32, while 1e8 + -1e8 + 1 = 1: the order is the contract.
  EXPECT_EQ(reduce<float>(ReduceOp::sum, {{1e8f}, {1.0f}, {-1e8f}})[0], 0.0f);
  EXPECT_EQ(reduce<float>(ReduceOp::sum, {{1e8f}, {-1e8f}, {1.0f}})[0], 1.0f);
}

TEST(ReduceReference, SingleInputIsIdentityExceptAvgRounding) {
  const std::vector<std::vector<double>> in = {{1.25, -3, 7}};
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    EXPECT_EQ(reduce(op, in), in[0]);
  }
}

TEST(ReduceReference, NanPropagatesInMinMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(reduce<float>(ReduceOp::min, {{1.0f}, {nan}, {0.0f}})[0]));
  EXPECT_TRUE(std::isnan(reduce<float>(ReduceOp::max, {{nan}, {1.0f}})[0]));
  EXPECT_TRUE(std::isnan(reduce<float>(ReduceOp::max, {{1.0f}, {nan}})[0]));
}

TEST(ReduceReference, HalfAccumulatesInFloatAndRoundsOnce) {
  // 2048 + 1 + 1 in half: stepwise rounding gives 2048 (1 is below half an ulp at 2048, a
  // tie to even), one rounding of the float sum gives 2050.
  const sk::Half a = sk::float_to_half(2048), one = sk::float_to_half(1);
  const auto out = reduce<sk::Half>(ReduceOp::sum, {{a}, {one}, {one}});
  EXPECT_EQ(sk::half_to_float(out[0]), 2050.0f);
  const auto bf =
      reduce<sk::BFloat16>(ReduceOp::avg, {{sk::float_to_bf16(1)}, {sk::float_to_bf16(2)}});
  EXPECT_EQ(sk::bf16_to_float(bf[0]), 1.5f);
}

TEST(ReduceReference, IntegersWrapAndAverageExactly) {
  const std::int32_t big = std::numeric_limits<std::int32_t>::max();
  EXPECT_EQ(reduce<std::int32_t>(ReduceOp::sum, {{big}, {1}})[0],
            std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(reduce<std::int32_t>(ReduceOp::avg, {{big}, {big}, {big}})[0], big);  // no overflow
  EXPECT_EQ(reduce<std::int32_t>(ReduceOp::avg, {{-7}, {0}})[0], -3);             // toward zero
  EXPECT_EQ(reduce<std::int32_t>(ReduceOp::prod, {{65536}, {65536}, {3}})[0], 0);
  EXPECT_EQ(reduce<std::int32_t>(ReduceOp::min, {{5}, {-9}, {3}})[0], -9);
  EXPECT_EQ(reduce<std::int64_t>(ReduceOp::max, {{-5}, {-9}, {-3}})[0], -3);
  EXPECT_EQ(reduce<std::int64_t>(ReduceOp::prod, {{1LL << 40}, {-(1LL << 20)}})[0], -(1LL << 60));
  EXPECT_EQ(reduce<std::uint8_t>(ReduceOp::sum, {{200}, {100}})[0], 44);
  EXPECT_EQ(reduce<std::uint8_t>(ReduceOp::avg, {{200}, {100}})[0], 150);
  EXPECT_EQ(reduce<std::uint8_t>(ReduceOp::max, {{200}, {100}, {255}})[0], 255);
  EXPECT_EQ(reduce<std::uint8_t>(ReduceOp::prod, {{16}, {16}, {3}})[0], 0);
}

TEST(ReduceReference, InPlaceAndTypeErasedDispatch) {
  std::vector<std::int64_t> a = {1, 2, 3}, b = {10, 20, 30};
  const void* ptrs[] = {a.data(), b.data()};
  sk::reduce_reference(DType::i64, ReduceOp::sum, ptrs, 2, a.data(), a.size());
  EXPECT_EQ(a, (std::vector<std::int64_t>{11, 22, 33}));
  EXPECT_EQ(sk::element_size(DType::f16), 2u);
  EXPECT_EQ(sk::element_size(DType::bf16), 2u);
  EXPECT_EQ(sk::element_size(DType::f64), 8u);
  EXPECT_EQ(sk::element_size(DType::u8), 1u);
}

}  // namespace
