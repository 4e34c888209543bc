// Which copy of the folds runs (fold.hpp): chosen once per process from what the CPU has,
// capped by SPARK_MAX_CPU_ISA (each communicator passes its setting on when it is built).
#include "coll/reduce.hpp"

#include <atomic>
#include <iterator>

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

#if defined(SPARK_FOLD_X86_LEVELS)
// A level added to SPARK_CPU_ISAS (cpu_isa.hpp) needs its copy here and in CMake: else
// SPARK_MAX_CPU_ISA would take a word whose copy is never built.
static_assert(std::size(kLevels) == kCpuIsaCount, "a CPU level without its copy of the folds");
#endif

const Level& widest(CpuIsa cap) {
  for (const Level& l : kLevels)
    if (l.isa <= cap && l.cpu_has()) return l;
  return kLevels[std::size(kLevels) - 1];
}

std::atomic<const Level*> chosen{nullptr};

const Level& current() {
  const Level* l = chosen.load(std::memory_order_acquire);
  if (l != nullptr) return *l;
  // First use without a cap set: the widest; a cap set meanwhile by another thread wins.
  const Level* expected = nullptr;
  l = &widest(kWidestCpuIsa);
  return chosen.compare_exchange_strong(expected, l, std::memory_order_acq_rel) ? *l : *expected;
}

}  // namespace

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

}  // namespace spark::coll
