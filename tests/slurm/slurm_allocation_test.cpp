// Unit tests for reading an allocation from SLURM's environment variables (from a map: no
// setenv, no SLURM daemons).
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "slurm_allocation.hpp"

namespace spark::launch::slurm {
namespace {

using Env = std::map<std::string, std::string>;

TEST(SlurmAllocation, NotInsideAnAllocation) {
  EXPECT_FALSE(read_allocation({}, {0, 1}).has_value());
  EXPECT_FALSE(read_allocation({{"SLURM_CONF", "/x"}, {"SLURM_TASKS_PER_NODE", "2"}}, {}));
}

TEST(SlurmAllocation, MultiNodeBatchJob) {
  const Env env{{"SLURM_JOB_ID", "4711"},
                {"SLURM_JOB_NODELIST", "spark[1-3,5]"},
                {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                {"SLURM_NTASKS", "7"},
                {"SLURM_CPUS_ON_NODE", "20"},
                {"SLURMD_NODENAME", "spark1"}};
  const auto a = read_allocation(env, {15, 16, 17, 18, 19});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->job_id, "4711");
  ASSERT_EQ(a->nodes.size(), 4u);
  EXPECT_EQ(a->nodes[0].name, "spark1");
  EXPECT_EQ(a->nodes[0].tasks, 2);
  EXPECT_EQ(a->nodes[2].name, "spark3");
  EXPECT_EQ(a->nodes[2].tasks, 2);
  EXPECT_EQ(a->nodes[3].name, "spark5");
  EXPECT_EQ(a->nodes[3].tasks, 1);
  EXPECT_EQ(a->host_names(), (std::vector<std::string>{"spark1", "spark2", "spark3", "spark5"}));
  EXPECT_EQ(a->ntasks, 7);
  EXPECT_EQ(a->cpus_on_node, 20);
  EXPECT_EQ(a->this_node, "spark1");
  EXPECT_EQ(a->cpus, (std::vector<int>{15, 16, 17, 18, 19}));
  EXPECT_FALSE(a->step_id.has_value());
  EXPECT_FALSE(a->only_node_is("spark1"));
}

TEST(SlurmAllocation, SallocShellWithoutNtasksSumsTheNodes) {
  // salloc's shell runs on the submit host: no SLURMD_NODENAME, no SLURM_CPUS_ON_NODE.
  const Env env{{"SLURM_JOB_ID", "3"},
                {"SLURM_JOB_NODELIST", "a,b[01-02]"},
                {"SLURM_TASKS_PER_NODE", "4,2(x2)"}};
  const auto a = read_allocation(env, {0, 1});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->ntasks, 8);
  EXPECT_FALSE(a->cpus_on_node.has_value());
  EXPECT_EQ(a->this_node, "");
  EXPECT_EQ(a->host_names(), (std::vector<std::string>{"a", "b01", "b02"}));
}

TEST(SlurmAllocation, OlderVariableNames) {
  const Env env{{"SLURM_JOBID", "12"},
                {"SLURM_NODELIST", "n1"},
                {"SLURM_TASKS_PER_NODE", "3"},
                {"SLURM_NPROCS", "3"},
                {"SLURM_STEP_ID", "0"}};
  const auto a = read_allocation(env, {});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->job_id, "12");
  EXPECT_EQ(a->ntasks, 3);
  EXPECT_EQ(a->step_id, "0");
}

TEST(SlurmAllocation, OnlyNodeIs) {
  Env env{{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_NODELIST", "vm"}, {"SLURM_TASKS_PER_NODE", "3"}};
  auto a = read_allocation(env, {});
  EXPECT_TRUE(a->only_node_is("vm"));
  EXPECT_TRUE(a->only_node_is("vm.lab.example"));
  EXPECT_FALSE(a->only_node_is("login1"));
  // On an allocated node SLURMD_NODENAME decides (node names need not be host names).
  env["SLURM_JOB_NODELIST"] = "node7";
  env["SLURMD_NODENAME"] = "node7";
  a = read_allocation(env, {});
  EXPECT_TRUE(a->only_node_is("some-other-hostname"));
}

void expect_refused(const Env& env, const std::string& needle) {
  try {
    read_allocation(env, {});
    ADD_FAILURE() << "accepted, expected an error containing: " << needle;
  } catch (const SlurmError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SlurmAllocation, BrokenEnvironmentsAreRefused) {
  const Env ok{
      {"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}};
  ASSERT_TRUE(read_allocation(ok, {}).has_value());
  auto with = [&](const std::string& key, const std::string& value) {
    Env e = ok;
    e[key] = value;
    return e;
  };
  auto without = [&](const std::string& key) {
    Env e = ok;
    e.erase(key);
    return e;
  };
  expect_refused(with("SLURM_JOB_ID", ""), "SLURM_JOB_ID='' is not a job number");
  expect_refused(with("SLURM_JOB_ID", "12x"), "is not a job number");
  expect_refused(without("SLURM_JOB_NODELIST"), "SLURM_JOB_NODELIST is not");
  expect_refused(without("SLURM_TASKS_PER_NODE"), "SLURM_TASKS_PER_NODE is not");
  expect_refused(with("SLURM_JOB_NODELIST", "n[1-2"), "SLURM_JOB_NODELIST 'n[1-2' is malformed");
  expect_refused(with("SLURM_TASKS_PER_NODE", "2(x3)"), "names 2 nodes but SLURM_TASKS_PER_NODE");
  expect_refused(with("SLURM_TASKS_PER_NODE", "2(x"), "SLURM_TASKS_PER_NODE '2(x' is malformed");
  expect_refused(with("SLURM_JOB_NODELIST", "n1,n1"), "names node 'n1' twice");
  expect_refused(with("SLURM_NTASKS", "0"), "SLURM_NTASKS='0' is not a positive integer");
  expect_refused(with("SLURM_NTASKS", "3x"), "SLURM_NTASKS='3x'");
  expect_refused(with("SLURM_CPUS_ON_NODE", ""), "SLURM_CPUS_ON_NODE=''");
}

TEST(SlurmAllocation, ProcessCpusFollowsTheAffinityMask) {
  const std::vector<int> all = process_cpus();
  ASSERT_FALSE(all.empty());
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(static_cast<int>(all.size()), [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    return CPU_COUNT(&set);
  }());
  // Narrow a thread's mask (as SLURM's task/affinity or `taskset` would) and read it back.
  std::vector<int> narrowed;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(all.back(), &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) narrowed = process_cpus();
  }).join();
  EXPECT_EQ(narrowed, std::vector<int>{all.back()});
}

}  // namespace
}  // namespace spark::launch::slurm
