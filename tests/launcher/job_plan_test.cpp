#include <gtest/gtest.h>

#include "hostfile.hpp"
#include "job_plan.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

PlanInput local(int cpus) {
  PlanInput in;
  in.local_cpus = cpus;
  in.local_name = "box";
  in.is_local = [](const std::string& h) { return is_this_machine(h, "box.example.org"); };
  return in;
}

TEST(JobPlan, NoHostListTakesAnyCountWithANote) {
  PlanInput in = local(2);
  in.np = 3;
  JobPlan p = make_job_plan(in);
  EXPECT_EQ(p.size, 3);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].host, "box");
  EXPECT_EQ(p.nodes[0].ranks, (std::vector<int>{0, 1, 2}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(p.ranks[r].rank, r);
    EXPECT_EQ(p.ranks[r].local_rank, r);
    EXPECT_EQ(p.ranks[r].node, 0);
  }
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("share"), std::string::npos);
}

TEST(JobPlan, DefaultCountIsAllSlots) {
  PlanInput in = local(4);
  EXPECT_EQ(make_job_plan(in).size, 4);
  in.hosts = {{"localhost", 3, true}};
  EXPECT_EQ(make_job_plan(in).size, 3);
}

TEST(JobPlan, SlotsAreEnforced) {
  PlanInput in = local(8);
  in.np = 3;
  in.hosts = {{"localhost", 2, true}};
  EXPECT_THROW(make_job_plan(in), UsageError);
  in.oversubscribe = true;
  JobPlan p = make_job_plan(in);
  EXPECT_EQ(p.nodes[0].host, "localhost");
  EXPECT_EQ(p.nodes[0].ranks.size(), 3u);
}

TEST(JobPlan, RemoteHostsAreMarked) {
  PlanInput in = local(8);
  in.np = 3;
  in.hosts = {{"localhost", 2, true}, {"spark2", 1, true}};
  JobPlan p = make_job_plan(in);
  ASSERT_EQ(p.nodes.size(), 2u);
  EXPECT_TRUE(p.nodes[0].local);
  EXPECT_EQ(p.nodes[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_FALSE(p.nodes[1].local);
  EXPECT_EQ(p.nodes[1].host, "spark2");
  EXPECT_EQ(p.ranks[2].node, 1);
  EXPECT_EQ(p.ranks[2].local_rank, 0);
}

TEST(JobPlan, ThisMachineTwiceIsRefused) {
  PlanInput in = local(8);
  in.hosts = {{"localhost", 1, true}, {"127.0.0.1", 1, true}};
  EXPECT_THROW(make_job_plan(in), UsageError);
}

TEST(JobPlan, PerNodeFillsEveryHost) {
  PlanInput in = local(2);
  in.hosts = parse_host_list("box,n2:8,n3");
  in.per_node = 2;
  JobPlan p = make_job_plan(in);  // -n defaults to -N x hosts
  EXPECT_EQ(p.size, 6);
  ASSERT_EQ(p.nodes.size(), 3u);
  for (const auto& n : p.nodes) EXPECT_EQ(n.ranks.size(), 2u) << n.host;
  in.np = 7;
  try {
    make_job_plan(in);
    FAIL() << "-n 7 with -N 2 on 3 hosts was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-N 2"), std::string::npos) << e.what();
  }
}

TEST(JobPlan, LocalNames) {
  EXPECT_TRUE(is_this_machine("localhost", "box"));
  EXPECT_TRUE(is_this_machine("127.0.0.1", "box"));
  EXPECT_TRUE(is_this_machine("box", "box.example.org"));
  EXPECT_TRUE(is_this_machine("box.example.org", "box"));
  EXPECT_FALSE(is_this_machine("spark2", "box"));
}

}  // namespace
}  // namespace spark::launch
