// Unit tests for the launcher's SLURM hook: allocation -> host list and -n default.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "slurm_nodes.hpp"
#include "slurm_plan.hpp"
#include "usage_error.hpp"

namespace spark::launch::slurm {
namespace {

Allocation one_node(const std::string& name, int tasks) {
  Allocation a;
  a.job_id = "42";
  a.nodes = {{name, tasks}};
  a.ntasks = tasks;
  a.cpus = {0, 1};
  return a;
}

TEST(SlurmPlan, NoAllocationChangesNothing) {
  PlanInput in;
  EXPECT_FALSE(apply_allocation(in, std::nullopt, "vm").has_value());
  EXPECT_FALSE(in.np.has_value());
  EXPECT_TRUE(in.hosts.empty());
}

TEST(SlurmPlan, ExplicitHostListWins) {
  PlanInput in;
  in.hosts = {{"localhost", 2, true}};
  EXPECT_FALSE(apply_allocation(in, one_node("vm", 3), "vm").has_value());
  ASSERT_EQ(in.hosts.size(), 1u);
  EXPECT_EQ(in.hosts[0].name, "localhost");
  EXPECT_FALSE(in.np.has_value());
}

TEST(SlurmPlan, NpDefaultsToTheAllocationsTasksAndThePlanRunsLocally) {
  PlanInput in;
  in.local_cpus = 2;
  in.local_name = "vm";
  in.is_local = [](const std::string& h) { return is_this_machine(h, "vm"); };
  const auto use = apply_allocation(in, one_node("vm", 3), "vm.cluster");
  ASSERT_TRUE(use.has_value());
  EXPECT_EQ(use->note, "SLURM allocation 42: 3 ranks on vm:3 (cpus 0-1)");
  EXPECT_FALSE(use->via_srun);
  EXPECT_EQ(in.np, 3);
  const JobPlan plan = make_job_plan(in);
  EXPECT_EQ(plan.size, 3);
  ASSERT_EQ(plan.nodes.size(), 1u);
  EXPECT_TRUE(plan.nodes[0].local);
  EXPECT_EQ(plan.nodes[0].host, "vm");
  EXPECT_EQ(plan.nodes[0].ranks.size(), 3u);
}

TEST(SlurmPlan, ExplicitNpWithinTheAllocation) {
  PlanInput in;
  in.np = 2;
  apply_allocation(in, one_node("vm", 3), "vm");
  EXPECT_EQ(in.np, 2);
}

TEST(SlurmPlan, NpAboveTheAllocationIsRefused) {
  PlanInput in;
  in.np = 5;
  try {
    apply_allocation(in, one_node("vm", 3), "vm");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-n 5 is more than the 3 tasks of SLURM allocation 42"),
              std::string::npos)
        << e.what();
  }
  in.oversubscribe = true;
  EXPECT_NO_THROW(apply_allocation(in, one_node("vm", 3), "vm"));
}

TEST(SlurmPlan, NodeNamedBySlurmdNodenameIsThisMachine) {
  Allocation a = one_node("node7", 2);
  a.this_node = "node7";
  PlanInput in;
  in.is_local = [](const std::string& h) { return is_this_machine(h, "vm"); };
  ASSERT_TRUE(apply_allocation(in, a, "vm").has_value());
  ASSERT_EQ(in.hosts.size(), 1u);
  EXPECT_EQ(in.hosts[0].name, "vm");  // the name the plan recognises as local
  EXPECT_TRUE(make_job_plan(in).nodes[0].local);
}

TEST(SlurmPlan, RanksOnOtherNodesStartDaemonsThroughSrun) {
  // sbatch -N 2 -n 4: the batch script runs on spark1 (SLURMD_NODENAME).
  Allocation a;
  a.job_id = "7";
  a.nodes = {{"spark1", 2}, {"spark2", 2}};
  a.ntasks = 4;
  a.this_node = "spark1";
  PlanInput in;
  in.is_local = [](const std::string& h) { return is_this_machine(h, "spark1"); };
  const auto use = apply_allocation(in, a, "spark1");
  ASSERT_TRUE(use.has_value());
  EXPECT_TRUE(use->via_srun);
  EXPECT_EQ(use->note,
            "SLURM allocation 7: 4 ranks on spark1:2,spark2:2; node daemons through srun");
  EXPECT_EQ(in.np, 4);
  const JobPlan plan = make_job_plan(in);
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_EQ(plan.nodes[0].host, "spark1");  // SLURM's names: SPARK_HOST, srun -w
  EXPECT_TRUE(plan.nodes[0].local);         // the batch node runs its daemon directly
  EXPECT_EQ(plan.nodes[1].host, "spark2");
  EXPECT_FALSE(plan.nodes[1].local);
  EXPECT_EQ(plan.nodes[1].ranks, (std::vector<int>{2, 3}));

  // Ranks that fit on this node alone stay a local job (no srun).
  PlanInput two;
  two.np = 2;
  two.is_local = [](const std::string& h) { return is_this_machine(h, "spark1"); };
  const auto local = apply_allocation(two, a, "spark1");
  ASSERT_TRUE(local.has_value());
  EXPECT_FALSE(local->via_srun);
  const JobPlan p2 = make_job_plan(two);
  ASSERT_EQ(p2.nodes.size(), 1u);
  EXPECT_EQ(p2.nodes[0].host, "spark1");
  EXPECT_TRUE(p2.nodes[0].local);

  // --map-by node spreads even two ranks over both nodes: srun again.
  PlanInput spread;
  spread.np = 2;
  spread.map_by_node = true;
  spread.is_local = two.is_local;
  EXPECT_TRUE(apply_allocation(spread, a, "spark1")->via_srun);
}

TEST(SlurmPlan, SubmitHostOutsideTheAllocationStartsEveryDaemonThroughSrun) {
  // salloc's shell runs on the login node (no SLURMD_NODENAME); even a node that shares the
  // login node's host name is started through srun (only that puts it inside the job).
  Allocation a;
  a.job_id = "9";
  a.nodes = {{"login1", 1}, {"spark3", 3}};
  a.ntasks = 4;
  PlanInput in;
  in.is_local = [](const std::string& h) { return is_this_machine(h, "login1"); };
  const auto use = apply_allocation(in, a, "login1");
  ASSERT_TRUE(use.has_value() && use->via_srun);
  const JobPlan plan = make_job_plan(in);
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_FALSE(plan.nodes[0].local);
  EXPECT_FALSE(plan.nodes[1].local);
  EXPECT_EQ(plan.nodes[1].ranks.size(), 3u);
}

TEST(SlurmPlan, SrunLaunchAgentIsOneOverlappingTaskPerNode) {
  const std::string agent = srun_launch_agent();
  for (const char* word : {"srun ", "--overlap", "--nodes=1", "--ntasks=1", "--nodelist={host}",
                           "--input=0", "--mpi=none", "env -u SLURM_PROCID"}) {
    EXPECT_NE(agent.find(word), std::string::npos) << word << " missing in " << agent;
  }
}

TEST(SlurmNodes, NodeAddrFromScontrolOneLiners) {
  const auto m = parse_node_addresses(
      "NodeName=sn1 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 NodeAddr=10.78.232.2 "
      "NodeHostName=sn1 Version=22.05.8\n"
      "NodeName=sn2 Arch=x86_64 NodeAddr=10.78.232.3 NodeHostName=sn2\n"
      "Node bogus not found\n"
      "NodeName=half\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("sn1"), "10.78.232.2");
  EXPECT_EQ(m.at("sn2"), "10.78.232.3");
  EXPECT_TRUE(parse_node_addresses("").empty());
}

TEST(SlurmNodes, NamesThatResolveNeedNoLookup) {
  // localhost resolves: no scontrol call, nothing to map.
  EXPECT_TRUE(unresolved_node_addresses({"localhost", "127.0.0.1"}).empty());
}

}  // namespace
}  // namespace spark::launch::slurm
