// Element types and reduction operators: sizes, names, strict parsing.
#include "spark/types.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "coll/reduce.hpp"
#include "spark/error.hpp"

namespace spark {
namespace {

constexpr std::array<std::pair<std::string_view, DType>, 18> kDTypeNames{{
    {"f32", DType::f32},
    {"float", DType::f32},
    {"float32", DType::f32},
    {"f64", DType::f64},
    {"double", DType::f64},
    {"float64", DType::f64},
    {"f16", DType::f16},
    {"half", DType::f16},
    {"float16", DType::f16},
    {"bf16", DType::bf16},
    {"bfloat16", DType::bf16},
    {"i32", DType::i32},
    {"int32", DType::i32},
    {"int", DType::i32},
    {"i64", DType::i64},
    {"int64", DType::i64},
    {"u8", DType::u8},
    {"uint8", DType::u8},
}};

constexpr std::array<std::pair<std::string_view, ReduceOp>, 5> kOpNames{{
    {"sum", ReduceOp::sum},
    {"prod", ReduceOp::prod},
    {"min", ReduceOp::min},
    {"max", ReduceOp::max},
    {"avg", ReduceOp::avg},
}};

}  // namespace

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::u8:
      return 1;
  }
  return 0;
}

std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
    case DType::u8:
      return "u8";
  }
  return "invalid-dtype";
}

std::string_view to_string(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
    case ReduceOp::avg:
      return "avg";
  }
  return "invalid-op";
}

DType parse_dtype(std::string_view name) {
  for (const auto& [spelling, dtype] : kDTypeNames) {
    if (spelling == name) return dtype;
  }
  throw InvalidUsage(fmt::format(
      "unknown dtype \"{}\": use one of f32 (float, float32), f64 (double, float64), f16 (half, "
      "float16), bf16 (bfloat16), i32 (int, int32), i64 (int64), u8 (uint8)",
      name));
}

ReduceOp parse_reduce_op(std::string_view name) {
  for (const auto& [spelling, op] : kOpNames) {
    if (spelling == name) return op;
  }
  throw InvalidUsage(
      fmt::format("unknown reduction op \"{}\": use one of sum, prod, min, max, avg", name));
}

void store_value(void* dst, DType dtype, double v) noexcept {
  auto put = [dst](auto x) { std::memcpy(dst, &x, sizeof x); };
  switch (dtype) {
    case DType::f32:
      return put(static_cast<float>(v));
    case DType::f64:
      return put(v);
    case DType::f16:
      return put(coll::float_to_f16(static_cast<float>(v)));
    case DType::bf16:
      return put(coll::float_to_bf16(static_cast<float>(v)));
    case DType::i32:
      return put(static_cast<std::int32_t>(std::llround(v)));
    case DType::i64:
      return put(static_cast<std::int64_t>(std::llround(v)));
    case DType::u8:
      return put(static_cast<std::uint8_t>(std::llround(v)));
  }
}

void reduce_local(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
                  ReduceOp op) {
  if (n < 1) throw InvalidUsage(fmt::format("reduce_local: n = {}: needs at least one input", n));
  coll::reduce_n(out, inputs, n, count, dtype, op);
}

}  // namespace spark
