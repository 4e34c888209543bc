// Which copy of the folds runs (fold.hpp): chosen once per process from what the CPU has,
// capped by SPARK_MAX_CPU_ISA (comm/init.cpp passes it on).
#include "coll/reduce.hpp"

#include <atomic>
#include <stdexcept>
#include <string>

#include "coll/fold.hpp"

namespace spark::coll {
namespace {

// Widest first; the first the CPU has and the cap allows is used.
struct Level {
  CpuIsa isa;
  FoldFn fold;
  bool (*cpu_has)();
};
const Level kLevels[] = {
#if defined(SPARK_FOLD_X86_LEVELS)
    {CpuIsa::x86_64_v4, &x86v4::fold,
     [] {
       __builtin_cpu_init();
       return __builtin_cpu_supports("x86-64-v4") != 0;
     }},
    {CpuIsa::x86_64_v3, &x86v3::fold,
     [] {
       __builtin_cpu_init();
       return __builtin_cpu_supports("x86-64-v3") != 0;
     }},
#endif
    {CpuIsa::baseline, &baseline::fold, [] { return true; }},
};

const Level& widest(CpuIsa cap) {
  for (const Level& l : kLevels)
    if (l.isa <= cap && l.cpu_has()) return l;
  return kLevels[std::size(kLevels) - 1];
}

constexpr CpuIsa kWidest = CpuIsa::x86_64_v4;
std::atomic<const Level*> chosen{nullptr};

const Level& current() {
  const Level* l = chosen.load(std::memory_order_acquire);
  if (l == nullptr) {
    l = &widest(kWidest);
    chosen.store(l, std::memory_order_release);
  }
  return *l;
}

}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) noexcept {
#define SPARK_CPU_ISA_CASE(e, name) \
  case CpuIsa::e:                   \
    return name;
  switch (isa) { SPARK_CPU_ISAS(SPARK_CPU_ISA_CASE) }
#undef SPARK_CPU_ISA_CASE
  return "?";
}

CpuIsa parse_cpu_isa(std::string_view text) {
#define SPARK_CPU_ISA_MATCH(e, name) \
  if (text == name) return CpuIsa::e;
  SPARK_CPU_ISAS(SPARK_CPU_ISA_MATCH)
#undef SPARK_CPU_ISA_MATCH
  if (text == "auto") return kWidest;
  throw std::invalid_argument("SPARK_MAX_CPU_ISA: '" + std::string(text) +
                              "' is not auto or a level of SPARK_CPU_ISAS");
}

CpuIsa limit_fold_isa(CpuIsa cap) noexcept {
  const Level& l = widest(cap);
  chosen.store(&l, std::memory_order_release);
  return l.isa;
}

CpuIsa fold_isa() noexcept {
  return current().isa;
}

std::vector<std::pair<CpuIsa, FoldFn>> runnable_folds() {
  std::vector<std::pair<CpuIsa, FoldFn>> all;
  for (const Level& l : kLevels)
    if (l.cpu_has()) all.emplace_back(l.isa, l.fold);
  return all;
}

void reduce_n(void* out, const void* const* inputs, int n, std::size_t count, DType dtype,
              ReduceOp op) {
  current().fold(out, inputs, n, count, dtype, op);
}

float f16_to_float(std::uint16_t h) noexcept {
  return baseline::f16_to_float(h);
}
std::uint16_t float_to_f16(float f) noexcept {
  return baseline::float_to_f16(f);
}
float bf16_to_float(std::uint16_t h) noexcept {
  return baseline::bf16_to_float(h);
}
std::uint16_t float_to_bf16(float f) noexcept {
  return baseline::float_to_bf16(f);
}

}  // namespace spark::coll
