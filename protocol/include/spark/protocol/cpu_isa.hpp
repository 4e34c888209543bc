// The instruction-set levels the folds are built for (libspark/src/coll/fold.hpp), and
// SPARK_MAX_CPU_ISA's words: "auto" and the levels' names (config/src/knobs.cpp). Here because
// both the knob table and the folds read it; the enum keeps the folds' namespace.
#pragma once

#include <optional>
#include <string_view>

namespace spark::coll {

/// X(enumerator, name), narrowest first.
#define SPARK_CPU_ISAS(X) \
  X(baseline, "baseline") X(x86_64_v3, "x86-64-v3") X(x86_64_v4, "x86-64-v4")

#define SPARK_CPU_ISA_ENUMERATOR(e, name) e,
enum class CpuIsa { SPARK_CPU_ISAS(SPARK_CPU_ISA_ENUMERATOR) };
#undef SPARK_CPU_ISA_ENUMERATOR

#define SPARK_CPU_ISA_COUNT(e, name) +1
/// How many levels the list has.
inline constexpr int kCpuIsaCount = 0 SPARK_CPU_ISAS(SPARK_CPU_ISA_COUNT);
#undef SPARK_CPU_ISA_COUNT

#define SPARK_CPU_ISA_LAST(e, name) CpuIsa::e,
/// "auto": the widest level of the list (on a CPU without it, the widest it has).
inline constexpr CpuIsa kWidestCpuIsa = [] {
  constexpr CpuIsa all[] = {SPARK_CPU_ISAS(SPARK_CPU_ISA_LAST)};
  return all[sizeof all / sizeof all[0] - 1];
}();
#undef SPARK_CPU_ISA_LAST

constexpr std::string_view cpu_isa_name(CpuIsa isa) noexcept {
#define SPARK_CPU_ISA_CASE(e, name) \
  case CpuIsa::e:                   \
    return name;
  switch (isa) { SPARK_CPU_ISAS(SPARK_CPU_ISA_CASE) }
#undef SPARK_CPU_ISA_CASE
  return "?";
}

/// A word of SPARK_MAX_CPU_ISA as the cap it sets ("auto": kWidestCpuIsa); nullopt otherwise.
constexpr std::optional<CpuIsa> cpu_isa_from_word(std::string_view word) noexcept {
  if (word == "auto") return kWidestCpuIsa;
#define SPARK_CPU_ISA_MATCH(e, name) \
  if (word == name) return CpuIsa::e;
  SPARK_CPU_ISAS(SPARK_CPU_ISA_MATCH)
#undef SPARK_CPU_ISA_MATCH
  return std::nullopt;
}

}  // namespace spark::coll
