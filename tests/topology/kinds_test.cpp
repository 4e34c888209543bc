// Kind decisions from evidence alone (no hwloc): which source wins and why.
#include <gtest/gtest.h>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/kinds.hpp"

namespace spark::topo {
namespace {

// GB10 evidence: cpus 0-4 and 10-14 are A725, 5-9 and 15-19 X925.
std::vector<CpuEvidence> gb10(bool midr, bool capacity) {
  std::vector<CpuEvidence> out;
  for (int cpu = 0; cpu < 20; ++cpu) {
    bool big = (cpu >= 5 && cpu < 10) || cpu >= 15;
    out.push_back({cpu, midr ? (big ? 0xd85U : 0xd87U) : 0U,
                   capacity ? (big ? (cpu >= 15 ? 1024U : 997U) : (cpu >= 10 ? 731U : 718U)) : 0U,
                   cpu < 5    ? 2808U
                   : cpu < 10 ? 3900U
                   : cpu < 15 ? 2860U
                              : 4004U});
  }
  return out;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

std::vector<HwlocKind> wrong_kinds() {
  return {{range(0, 9), 0, ""}, {range(10, 19), 1, ""}};
}

TEST(Kinds, CorrectCpukindsConfirmedByMidr) {
  std::vector<int> slow = range(0, 4), fast = range(5, 9);
  slow.insert(slow.end(), {10, 11, 12, 13, 14});
  fast.insert(fast.end(), {15, 16, 17, 18, 19});
  auto r = decide_kinds(gb10(true, true), {{slow, 0, ""}, {fast, 1, ""}}, "uniform");
  EXPECT_EQ(r.decision.source, "hwloc cpukinds");
  EXPECT_EQ(r.decision.detail, "confirmed by MIDR part number");
  EXPECT_TRUE(r.decision.cpukinds_trusted);
  ASSERT_EQ(r.kinds.size(), 2u);
  EXPECT_EQ(r.kinds[0].name, "Cortex-X925");
  EXPECT_EQ(format_cpu_list(r.kinds[0].cpus), "5-9,15-19");
  EXPECT_EQ(r.kinds[0].max_mhz, 4004u);
  EXPECT_EQ(r.kinds[1].name, "Cortex-A725");
}

TEST(Kinds, WrongCpukindsOverruledByMidr) {
  auto r = decide_kinds(gb10(true, true), wrong_kinds(), "uniform");
  EXPECT_EQ(r.decision.source, "MIDR part number");
  EXPECT_FALSE(r.decision.cpukinds_trusted);
  EXPECT_NE(r.decision.detail.find("they rank cpus 10-19 fastest"), std::string::npos)
      << r.decision.detail;
  EXPECT_EQ(format_cpu_list(r.kinds.at(0).cpus), "5-9,15-19");
}

TEST(Kinds, WrongCpukindsOverruledByCapacityWithoutMidr) {
  auto r = decide_kinds(gb10(false, true), wrong_kinds(), "uniform");
  EXPECT_EQ(r.decision.source, "sysfs cpu_capacity");
  EXPECT_EQ(format_cpu_list(r.kinds.at(0).cpus), "5-9,15-19");
  EXPECT_EQ(r.kinds[0].name, "kind0");  // no MIDR: no core name
}

TEST(Kinds, UncheckedCpukindsAreTrustedAndSaySo) {
  auto r = decide_kinds(gb10(false, false), wrong_kinds(), "uniform");
  EXPECT_EQ(r.decision.source, "hwloc cpukinds");
  EXPECT_NE(r.decision.detail.find("not cross-checked"), std::string::npos);
  EXPECT_EQ(format_cpu_list(r.kinds.at(0).cpus), "10-19");
}

TEST(Kinds, NoCpukindsFallsBackToMidrThenFrequency) {
  EXPECT_EQ(decide_kinds(gb10(true, false), {}, "u").decision.source, "MIDR part number");
  auto freq = decide_kinds(gb10(false, false), {}, "u");
  EXPECT_EQ(freq.decision.source, "max frequency");
  EXPECT_EQ(format_cpu_list(freq.kinds.at(0).cpus), "5-9,15-19");
}

TEST(Kinds, HomogeneousMachineIsOneKind) {
  std::vector<CpuEvidence> cpus{{0, 0, 1024, 0}, {1, 0, 1024, 0}};
  auto r = decide_kinds(cpus, {{{0, 1}, -1, ""}}, "AMD EPYC");
  EXPECT_EQ(r.decision.source, "hwloc cpukinds");
  EXPECT_EQ(r.decision.detail, "confirmed by sysfs cpu_capacity");
  ASSERT_EQ(r.kinds.size(), 1u);
  EXPECT_EQ(r.kinds[0].name, "AMD EPYC");
  auto none = decide_kinds({{0, 0, 0, 0}, {1, 0, 0, 0}}, {}, "uniform");
  EXPECT_EQ(none.decision.source, "uniform");
  EXPECT_EQ(none.kinds.size(), 1u);
}

TEST(Kinds, UnknownDifferingPartsCannotRank) {
  std::vector<CpuEvidence> cpus{{0, 0xabc, 0, 0}, {1, 0xd85, 0, 0}};
  auto r = decide_kinds(cpus, {}, "uniform");
  EXPECT_EQ(r.decision.source, "uniform");
  EXPECT_NE(r.decision.detail.find("0xabc is unknown"), std::string::npos) << r.decision.detail;
}

}  // namespace
}  // namespace spark::topo
