// The launcher's binding step (launcher/src/node/binding.cpp) with the real node runner: the plan
// is applied in each rank before exec and the rank's environment matches what it got.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "binding.hpp"
#include "usage_error.hpp"

extern char** environ;

namespace spark::launch {
namespace {

NodeRunSpec spec_for(int ranks) {
  NodeRunSpec spec;
  spec.job_id = "topotest." + std::to_string(getpid());
  spec.plan.size = ranks;
  NodePlan node;
  node.host = "node0";
  node.slots = ranks;
  for (int r = 0; r < ranks; ++r) {
    node.ranks.push_back(r);
    spec.plan.ranks.push_back({r, 0, r});
  }
  spec.plan.nodes.push_back(node);
  for (char** e = environ; e && *e; ++e) spec.base_env.emplace_back(*e);
  return spec;
}

// Runs plan_node_binding and returns what it printed.
std::string plan(const BindingOptions& b, NodeRunSpec& spec) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* err = open_memstream(&buf, &size);
  try {
    plan_node_binding(b, spec, err);
  } catch (...) {
    std::fclose(err);
    std::free(buf);
    throw;
  }
  std::fclose(err);
  std::string out(buf, size);
  std::free(buf);
  return out;
}

TEST(BindingHook, XmlPlanIsShownNotApplied) {
  NodeRunSpec spec = spec_for(3);
  std::string err = plan({"", "", SPARK_TOPO_DATA_DIR "/spark.xml", true}, spec);
  EXPECT_NE(err.find("sparkrun: node0  2     19     Cortex-X925  L3#1 16MB  "
                     "rocep1s0f0,roceP2p1s0f0\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("not this machine; ranks run here unbound\n"), std::string::npos) << err;
  EXPECT_TRUE(spec.cpusets.empty());
  for (const auto& t : spec.cpuset_text) EXPECT_EQ(t, "");
  for (const auto& l : spec.lanes) EXPECT_EQ(l, "");  // lanes of another machine: not exported
}

// This node's part of a two-node job: with SPARK_TRANSPORT=auto its ranks use RDMA lanes to the
// other node, so an HCA name this machine (spark.xml) does not have is refused, with the same
// message as ever; with tcp, or in a one-node job, it is not used and nothing is refused.
TEST(BindingHook, HcaNamesAreResolvedOnlyForRdmaLanes) {
  const BindingOptions xml{"", "", SPARK_TOPO_DATA_DIR "/spark.xml", true};
  NodeRunSpec two = spec_for(2);
  NodePlan other;
  other.host = "node1";
  other.slots = 1;
  other.ranks = {2};
  two.plan.nodes.push_back(other);
  two.plan.ranks.push_back({2, 1, 0});
  two.plan.size = 3;
  two.exports = {{"NCCL_IB_HCA", "mlx5_9"}};
  try {
    plan(xml, two);
    ADD_FAILURE() << "NCCL_IB_HCA=mlx5_9 was not refused in a two-node job";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "NCCL_IB_HCA=\"mlx5_9\": no HCA named \"mlx5_9\" on this machine; existing "
                  "HCAs: rocep1s0f0"),
              std::string::npos)
        << e.what();
  }
  two.exports.push_back({"SPARK_TRANSPORT", "tcp"});
  std::string err = plan(xml, two);
  EXPECT_NE(err.find("note: NCCL_IB_HCA=\"mlx5_9\" not used: no rank of this job uses RDMA lanes "
                     "(SPARK_TRANSPORT=tcp)"),
            std::string::npos)
      << err;
  NodeRunSpec one = spec_for(2);
  one.exports = {{"NCCL_IB_HCA", "mlx5_9"}};
  err = plan(xml, one);
  EXPECT_NE(err.find("not used: no rank of this job uses RDMA lanes (one node: its ranks use "
                     "shared memory)"),
            std::string::npos)
      << err;
  // The lanes the ranks are given are then the automatic ones.
  EXPECT_NE(err.find("rocep1s0f0,roceP2p1s0f0"), std::string::npos) << err;
}

TEST(BindingHook, RanksRunBoundWithMatchingEnvironment) {
  const int n = sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 2 : 1;
  NodeRunSpec spec = spec_for(n);
  plan({"core", "", "", false}, spec);
  ASSERT_EQ(spec.cpusets.size(), static_cast<size_t>(n));
  auto dir = std::filesystem::temp_directory_path() / ("spark-hook-" + std::to_string(getpid()));
  spec.output_dir = dir.string();
  std::filesystem::create_directories(dir);
  spec.program_path = "/bin/sh";
  spec.argv = {"sh", "-c",
               "echo \"$SPARK_CPUSET $(grep Cpus_allowed_list /proc/self/status | cut -f2)\""};
  // As sparkrun's main does: the node runner takes these signals through a signalfd.
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  spec.timeout_s = 60;
  ASSERT_EQ(run_node(spec), 0);
  for (int r = 0; r < n; ++r) {
    std::ifstream in(dir / ("rank." + std::to_string(r)) / "stdout");
    std::string cpuset, allowed;
    in >> cpuset >> allowed;
    EXPECT_EQ(cpuset, spec.cpuset_text[static_cast<size_t>(r)]) << "rank " << r;
    EXPECT_EQ(allowed, cpuset) << "rank " << r;
  }
  std::filesystem::remove_all(dir);
}

TEST(BindingHook, DefaultPolicyDoesNotPinSharedCores) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  NodeRunSpec spec = spec_for(static_cast<int>(cpus) + 1);
  std::string err = plan({"", "", "", true}, spec);
  EXPECT_TRUE(spec.cpusets.empty()) << err;
  EXPECT_NE(err.find("ranks would share cores (" + std::to_string(cpus + 1) + " ranks on " +
                     std::to_string(cpus) + " cores): left unbound; pass --bind-to to bind anyway"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("unbound"), err.rfind("unbound")) << "table shows unbound ranks: " << err;
  EXPECT_EQ(err.find("(shared)"), std::string::npos) << err;
  NodeRunSpec forced = spec_for(static_cast<int>(cpus) + 1);
  err = plan({"fast", "", "", true}, forced);
  EXPECT_FALSE(forced.cpusets.empty());
  EXPECT_NE(err.find("(shared)"), std::string::npos) << err;
}

TEST(BindingHook, RefusedRequests) {
  NodeRunSpec spec = spec_for(1);
  EXPECT_THROW(plan({"socket", "", "", false}, spec), UsageError);
  EXPECT_THROW(plan({"", "nic", "", false}, spec), UsageError);
  EXPECT_NO_THROW(plan({"", "node", "", false}, spec));
  spec.exports.emplace_back("SPARK_IB_HCA", "mlx5_0");
  spec.exports.emplace_back("SPARK_TRANSPORT", "roce");  // the ranks use RDMA lanes
  try {
    plan({"", "", SPARK_TOPO_DATA_DIR "/spark.xml", false}, spec);
    FAIL() << "no exception";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("existing HCAs: rocep1s0f0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace spark::launch
