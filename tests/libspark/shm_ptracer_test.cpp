// Yama and the single copy (transport/shm/ptracer.hpp): when a rank declares its parent as its
// ptracer, from what was read (Yama's scope, SPARK_SHM_CMA, SPARK_SHM_PTRACER, the parent pid).
// The real effect needs a kernel with Yama at scope 1: SingleCopy.SiblingsReachEachOtherUnderYama
// (libspark_collectives_test) runs there and skips elsewhere.
#include <gtest/gtest.h>

#include "transport/shm/ptracer.hpp"

namespace spark::transport {
namespace {

TEST(ShmPtracer, DeclaresTheParentOnlyUnderScopeOne) {
  const PtracerPlan p = plan_ptracer(1, true, true, 4321);
  EXPECT_TRUE(p.declare);
  EXPECT_EQ(p.tracer, 4321);
  EXPECT_NE(p.why.find("declared the parent (pid 4321)"), std::string::npos) << p.why;
}

TEST(ShmPtracer, NothingWithoutYamaOrAtScopeZero) {
  const PtracerPlan none = plan_ptracer(std::nullopt, true, true, 4321);
  EXPECT_FALSE(none.declare);
  EXPECT_TRUE(none.why.empty()) << "no Yama: nothing to say";
  const PtracerPlan zero = plan_ptracer(0, true, true, 4321);
  EXPECT_FALSE(zero.declare);
  EXPECT_NE(zero.why.find("ptrace_scope 0"), std::string::npos) << zero.why;
}

TEST(ShmPtracer, ScopesTwoAndThreeCannotBeLiftedAndSaySo) {
  for (int scope : {2, 3}) {
    const PtracerPlan p = plan_ptracer(scope, true, true, 4321);
    EXPECT_FALSE(p.declare) << scope;
    EXPECT_NE(p.why.find("stays off"), std::string::npos) << p.why;
  }
}

TEST(ShmPtracer, TheKnobsTurnItOff) {
  const PtracerPlan off = plan_ptracer(1, true, false, 4321);
  EXPECT_FALSE(off.declare);
  EXPECT_NE(off.why.find("SPARK_SHM_PTRACER=off"), std::string::npos) << off.why;
  const PtracerPlan no_cma = plan_ptracer(1, false, true, 4321);
  EXPECT_FALSE(no_cma.declare);
  EXPECT_NE(no_cma.why.find("SPARK_SHM_CMA=off"), std::string::npos) << no_cma.why;
}

TEST(ShmPtracer, NeverDeclaresInit) {
  // An orphan (its launcher died) would declare init, whose descendants are every process.
  for (int parent : {0, 1}) {
    const PtracerPlan p = plan_ptracer(1, true, true, parent);
    EXPECT_FALSE(p.declare) << parent;
    EXPECT_NE(p.why.find("would let every process of the pid namespace read"), std::string::npos)
        << p.why;
  }
}

TEST(ShmPtracer, ReadsThisKernelsScope) {
  const auto scope = read_yama_scope();
  if (!scope) GTEST_SKIP() << "no Yama on this kernel (/proc/sys/kernel/yama absent)";
  EXPECT_GE(*scope, 0);
  EXPECT_LE(*scope, 3);
}

}  // namespace
}  // namespace spark::transport
