// Unit tests for the launcher's SLURM hook: allocation -> host list and -n default.
#include <gtest/gtest.h>

#include <string>

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
  const auto note = apply_allocation(in, one_node("vm", 3), "vm.cluster");
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note, "SLURM allocation 42: 3 ranks on vm:3 (cpus 0-1)");
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

TEST(SlurmPlan, RanksOnOtherNodesAreRefusedUntilDaemonsExist) {
  Allocation a;
  a.job_id = "7";
  a.nodes = {{"spark1", 2}, {"spark2", 2}};
  a.ntasks = 4;
  a.this_node = "spark1";
  PlanInput in;
  in.is_local = [](const std::string& h) { return is_this_machine(h, "spark1"); };
  try {
    apply_allocation(in, a, "spark1");
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("SLURM allocation 7 puts ranks on node(s) spark2"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("srun --mpi=pmix -n 4"), std::string::npos) << msg;
  }
  // Ranks that fit on this node alone are fine.
  PlanInput two;
  two.np = 2;
  two.is_local = in.is_local;
  ASSERT_TRUE(apply_allocation(two, a, "spark1").has_value());
  const JobPlan plan = make_job_plan(two);
  ASSERT_EQ(plan.nodes.size(), 1u);
  EXPECT_EQ(plan.nodes[0].host, "spark1");
}

TEST(SlurmPlan, SubmitHostOutsideTheAllocationIsRefused) {
  // salloc's shell runs on the login node; the allocation is elsewhere.
  PlanInput in;
  in.is_local = [](const std::string& h) { return is_this_machine(h, "login1"); };
  EXPECT_THROW(apply_allocation(in, one_node("spark3", 3), "login1"), UsageError);
}

}  // namespace
}  // namespace spark::launch::slurm
