// Plans made from XML fixtures (tests/data): what sparkrun would do on a DGX Spark, a 2-socket
// server and this VM. XML topologies never bind; these tests check decisions only.
#include <gtest/gtest.h>

#include <map>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"

namespace spark::topo {
namespace {

MachineInfo load(const char* file) {
  LoadOptions o;
  o.xml_path = std::string(SPARK_TOPO_DATA_DIR) + "/" + file;
  return machine_info(Topology::load(o));
}

const MachineInfo& spark() {
  static const MachineInfo m = load("spark.xml");  // read-only after first use
  return m;
}

std::vector<std::string> cpusets(const Plan& p) {
  std::vector<std::string> out;
  for (const auto& r : p.ranks) out.push_back(r.cpuset);
  return out;
}

Plan plan(const MachineInfo& m, int ranks, BindTo b = BindTo::fast, MapBy map = MapBy::slot) {
  PlanOptions o;
  o.local_ranks = ranks;
  o.bind_to = b;
  o.map_by = map;
  return make_plan(m, o);
}

using V = std::vector<std::string>;

TEST(SparkTopology, KindsClustersLanes) {
  const MachineInfo& m = spark();
  EXPECT_FALSE(m.this_system);
  EXPECT_EQ(m.decision.source, "hwloc cpukinds");
  EXPECT_EQ(m.decision.detail, "confirmed by MIDR part number");
  ASSERT_EQ(m.kinds.size(), 2u);
  EXPECT_EQ(m.kinds[0].name, "Cortex-X925");
  EXPECT_EQ(format_cpu_list(m.kinds[0].cpus), "5-9,15-19");
  EXPECT_EQ(format_cpu_list(m.cores.front().cpus), "15");  // best core: X925 in the 16 MB L3
  ASSERT_EQ(m.clusters.size(), 2u);
  EXPECT_EQ(m.clusters[1].size_bytes, 16u << 20);
  ASSERT_EQ(m.lanes.size(), 4u);
  EXPECT_EQ(m.lanes[0].name, "rocep1s0f0");
  EXPECT_EQ(m.lanes[0].net, "enp1s0f0np0");
  EXPECT_EQ(m.lanes[2].name, "roceP2p1s0f0");
  EXPECT_EQ(m.lanes[2].link, "0002:01");
  ASSERT_EQ(m.gpus.size(), 1u);
  EXPECT_EQ(m.gpus[0].name, "NVIDIA GB10");
}

TEST(SparkPlan, OneRankGetsTheBestCluster) {
  Plan p = plan(spark(), 1);
  EXPECT_FALSE(p.applies_here);
  EXPECT_EQ(cpusets(p), V{"15-19"});
  EXPECT_EQ(p.ranks[0].kind, "Cortex-X925");
  EXPECT_EQ(p.ranks[0].l3, "L3#1 16MB");
  EXPECT_EQ(p.ranks[0].lanes, (V{"rocep1s0f0", "roceP2p1s0f0"}));  // both PCIe halves
  EXPECT_FALSE(p.ranks[0].shared);
  EXPECT_TRUE(p.notes.empty());
}

TEST(SparkPlan, TwoThreeFiveRanksFillTheBestClusterFirst) {
  EXPECT_EQ(cpusets(plan(spark(), 2)), (V{"15-17", "18-19"}));
  EXPECT_EQ(cpusets(plan(spark(), 3)), (V{"15-16", "17-18", "19"}));
  Plan five = plan(spark(), 5);
  EXPECT_EQ(cpusets(five), (V{"15", "16", "17", "18", "19"}));
  for (const auto& r : five.ranks) EXPECT_FALSE(r.shared);
  EXPECT_EQ(five.ranks[1].lanes, (V{"rocep1s0f1", "roceP2p1s0f1"}));  // ranks alternate ports
  EXPECT_EQ(five.ranks[2].lanes, (V{"rocep1s0f0", "roceP2p1s0f0"}));
}

TEST(SparkPlan, SpreadsToTheSecondClusterWhenTheFirstIsUsedUp) {
  Plan six = plan(spark(), 6);
  EXPECT_EQ(cpusets(six), (V{"15", "16", "17", "18", "19", "5-9"}));
  EXPECT_EQ(six.ranks[5].l3, "L3#0 8MB");
}

TEST(SparkPlan, MoreRanksThanFastCoresShareAndSaySo) {
  Plan p = plan(spark(), 12);
  EXPECT_EQ(p.ranks[10].cpuset, "15");
  EXPECT_TRUE(p.ranks[10].shared);
  EXPECT_TRUE(p.ranks[0].shared);
  EXPECT_FALSE(p.ranks[1].shared);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0],
            "ranks 0,5,10,11 share cores: 12 ranks on 10 fast (Cortex-X925) cores; --bind-to core "
            "also uses the slower cores");
}

TEST(SparkPlan, OtherPolicies) {
  EXPECT_EQ(cpusets(plan(spark(), 2, BindTo::fast, MapBy::l3)), (V{"15-19", "5-9"}));
  EXPECT_EQ(cpusets(plan(spark(), 3, BindTo::fast, MapBy::core)), (V{"15", "16", "17"}));
  EXPECT_EQ(cpusets(plan(spark(), 4, BindTo::core, MapBy::l3)), (V{"15", "5", "16", "6"}));
  EXPECT_EQ(cpusets(plan(spark(), 12, BindTo::core)),
            (V{"15", "16", "17", "18", "19", "5", "6", "7", "8", "9", "10", "11"}));
  Plan l3 = plan(spark(), 2, BindTo::l3);
  EXPECT_EQ(cpusets(l3), (V{"10-19", "0-9"}));
  EXPECT_EQ(l3.ranks[0].kind, "Cortex-A725+Cortex-X925");
  Plan l3shared = plan(spark(), 3, BindTo::l3);
  EXPECT_TRUE(l3shared.ranks[2].shared);
  Plan none = plan(spark(), 2, BindTo::none);
  EXPECT_EQ(cpusets(none), (V{"", ""}));
  EXPECT_EQ(none.ranks[1].lanes, (V{"rocep1s0f1", "roceP2p1s0f1"}));
  cpu_set_t set;
  EXPECT_FALSE(to_cpu_set(none.ranks[0], set));
}

TEST(SparkPlan, ExactReport) {
  EXPECT_EQ(format_report(plan(spark(), 3), "spark1", 3),
            "host    rank  cores  kind         L3         lanes\n"
            "spark1  3     15-16  Cortex-X925  L3#1 16MB  rocep1s0f0,roceP2p1s0f0\n"
            "spark1  4     17-18  Cortex-X925  L3#1 16MB  rocep1s0f1,roceP2p1s0f1\n"
            "spark1  5     19     Cortex-X925  L3#1 16MB  rocep1s0f0,roceP2p1s0f0\n");
}

TEST(SparkPlan, CpuSetForTheChild) {
  cpu_set_t set;
  ASSERT_TRUE(to_cpu_set(plan(spark(), 1).ranks[0], set));
  EXPECT_EQ(CPU_COUNT(&set), 5);
  EXPECT_TRUE(CPU_ISSET(15, &set));
  EXPECT_FALSE(CPU_ISSET(14, &set));
}

TEST(SparkPlan, DescribeNamesSourcesAndLanes) {
  std::string text = describe(spark());
  for (const char* want :
       {"core kinds, fastest first (decided by hwloc cpukinds; confirmed by MIDR part number)",
        "fast cores: 5-9,15-19", "L3#1  16MB  cpus 10-19  fast 15-19",
        "roceP2p1s0f0  net enP2p1s0f0np0  PCI 0002:01:00.0  PCIe link 0002:01",
        "GPU: NVIDIA GB10 (PCI 000f:01:00.0, cuda0"}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing \"" << want << "\" in\n" << text;
  }
}

TEST(SparkWrongCpukinds, CorrectedKindsWin) {
  MachineInfo m = load("spark-wrong-cpukinds.xml");
  EXPECT_EQ(m.decision.source, "MIDR part number");
  EXPECT_FALSE(m.decision.cpukinds_trusted);
  EXPECT_EQ(format_cpu_list(m.kinds.at(0).cpus), "5-9,15-19");
  EXPECT_EQ(cpusets(plan(m, 1)), V{"15-19"});
  EXPECT_EQ(cpusets(plan(m, 6)), (V{"15", "16", "17", "18", "19", "5-9"}));
  EXPECT_NE(describe(m).find("hwloc cpukinds disagree (they rank cpus 10-19 fastest)"),
            std::string::npos);
}

TEST(HcaOverride, SelectsNamedLanesForEveryRank) {
  PlanOptions o;
  o.local_ranks = 2;
  o.hca = "roceP2p1s0f1,rocep1s0f1";
  Plan p = make_plan(spark(), o);
  EXPECT_EQ(p.ranks[0].lanes, (V{"roceP2p1s0f1", "rocep1s0f1"}));
  EXPECT_EQ(p.ranks[1].lanes, p.ranks[0].lanes);
  o.hca = "enp1s0f0np0:1";  // net names and NCCL's :port are accepted
  EXPECT_EQ(make_plan(spark(), o).ranks[0].lanes, V{"rocep1s0f0"});
  o.hca = "^=rocep1s0f0";
  EXPECT_EQ(make_plan(spark(), o).ranks[0].lanes,
            (V{"rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"}));
}

TEST(HcaOverride, UnknownHcaListsTheExistingOnes) {
  PlanOptions o;
  o.hca = "mlx5_0";
  o.hca_source = "NCCL_IB_HCA";
  try {
    make_plan(spark(), o);
    FAIL() << "no exception";
  } catch (const TopologyError& e) {
    EXPECT_EQ(std::string(e.what()),
              "NCCL_IB_HCA=\"mlx5_0\": no HCA named \"mlx5_0\" on this machine; existing HCAs: "
              "rocep1s0f0 (enp1s0f0np0, PCI 0000:01:00.0), rocep1s0f1 (enp1s0f1np1, PCI "
              "0000:01:00.1), roceP2p1s0f0 (enP2p1s0f0np0, PCI 0002:01:00.0), roceP2p1s0f1 "
              "(enP2p1s0f1np1, PCI 0002:01:00.1)");
  }
  for (const char* bad : {"", "=", "rocep1s0f0,,rocep1s0f1", "rocep1s0f0:x", "rocep1s0f0:0",
                          "^roce"}) {  // "^roce" excludes all
    o.hca = bad;
    EXPECT_THROW(make_plan(spark(), o), TopologyError) << "accepted \"" << bad << "\"";
  }
}

TEST(HcaOverride, SparkVariableBeatsNccl) {
  std::map<std::string, std::string> env{{"NCCL_IB_HCA", "mlx5_0"}, {"SPARK_IB_HCA", "rocep1"}};
  auto lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  PlanOptions o;
  hca_from_env(o, lookup);
  EXPECT_EQ(o.hca_source, "SPARK_IB_HCA");
  EXPECT_EQ(make_plan(spark(), o).ranks[0].lanes, (V{"rocep1s0f0", "rocep1s0f1"}));
  env.erase("SPARK_IB_HCA");
  PlanOptions nccl;
  hca_from_env(nccl, lookup);
  EXPECT_EQ(nccl.hca_source, "NCCL_IB_HCA");
  EXPECT_THROW(make_plan(spark(), nccl), TopologyError);
}

TEST(CpuListRequest, RestrictsOrFailsWithReason) {
  PlanOptions o;
  o.local_ranks = 2;
  o.cpu_list = "0-9";
  EXPECT_EQ(cpusets(make_plan(spark(), o)), (V{"5-7", "8-9"}));
  o.cpu_list = "0-4";  // only slow cores allowed: the fastest available kind is used
  EXPECT_EQ(make_plan(spark(), o).ranks[0].kind, "Cortex-A725");
  o.cpu_list = "18-25";
  try {
    make_plan(spark(), o);
    FAIL() << "no exception";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("names cpus 20-25 that"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(usable cpus: 0-19)"), std::string::npos) << e.what();
  }
  o.cpu_list = "";
  EXPECT_THROW(make_plan(spark(), o), TopologyError);
  o.cpu_list.reset();
  o.local_ranks = 0;
  EXPECT_THROW(make_plan(spark(), o), TopologyError);
}

TEST(ServerPlan, NicLocalSocketIsChosen) {
  MachineInfo m = load("server-2socket.xml");
  ASSERT_EQ(m.lanes.size(), 2u);
  EXPECT_EQ(format_cpu_list(m.lanes[0].near_cpus), "16-31");
  Plan p = plan(m, 2);
  EXPECT_EQ(cpusets(p), (V{"16-23", "24-31"}));
  EXPECT_EQ(p.ranks[0].lanes, V{"mlx5_0"});
  EXPECT_EQ(p.ranks[1].lanes, V{"mlx5_1"});
  EXPECT_EQ(p.ranks[0].kind, "Intel(R) Xeon(R) Gold 6338");
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], "NIC-local cores: 16-31 (near mlx5_0 and others)");
  EXPECT_NE(describe(m).find("core kinds: one (no cpukinds, MIDR part number or cpu_capacity "
                             "differences):\n  Intel(R) Xeon(R) Gold 6338  cpus 0-31"),
            std::string::npos)
      << describe(m);
  // Bound to one core each, hyperthreads come along.
  EXPECT_EQ(cpusets(plan(m, 2, BindTo::core)), (V{"16-17", "18-19"}));
}

TEST(ThisVmFixture, NoNicFound) {
  MachineInfo m = load("this-vm.xml");
  EXPECT_TRUE(m.lanes.empty());
  Plan p = plan(m, 1);
  EXPECT_EQ(cpusets(p), V{"0-1"});
  EXPECT_TRUE(p.ranks[0].lanes.empty());
  EXPECT_EQ(p.notes, V{"no NIC found, binding by core speed only"});
  EXPECT_NE(describe(m).find("none: no NIC found, binding by core speed only"), std::string::npos);
  EXPECT_EQ(plan(m, 3).notes.back(), "ranks 0,2 share cores: 3 ranks on 2 cores");
  PlanOptions o;
  o.hca = "mlx5_0";
  try {
    make_plan(m, o);
    FAIL() << "no exception";
  } catch (const TopologyError& e) {
    EXPECT_NE(
        std::string(e.what()).find("existing HCAs: none (no PCI function with vendor 0x15b3)"),
        std::string::npos)
        << e.what();
  }
}

TEST(Parsing, BindToAndMapBy) {
  EXPECT_EQ(parse_bind_to("l3"), BindTo::l3);
  EXPECT_EQ(parse_map_by("core"), MapBy::core);
  EXPECT_THROW(parse_bind_to(""), TopologyError);
  EXPECT_THROW(parse_bind_to("Fast"), TopologyError);
  EXPECT_THROW(parse_map_by("socket"), TopologyError);
}

TEST(LoadErrors, MissingAndBrokenFiles) {
  LoadOptions o;
  o.xml_path = "/nonexistent/spark.xml";
  EXPECT_THROW(Topology::load(o), TopologyError);
  o.xml_path = std::string(SPARK_TOPO_DATA_DIR) + "/make_topologies.py";
  EXPECT_THROW(Topology::load(o), TopologyError);
  auto env = [](std::string_view) -> std::optional<std::string> { return std::string(); };
  EXPECT_THROW(load_options_from_env(env), TopologyError);
}

}  // namespace
}  // namespace spark::topo
