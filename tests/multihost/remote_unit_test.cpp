// Pure parts of multi-host launch: launch-agent command lines, control addresses,
// --map-by node placement.
#include <gtest/gtest.h>

#include "job_plan.hpp"
#include "remote_address.hpp"
#include "remote_agent.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

const std::vector<std::string> kDaemon = {"/opt/sparkrun", "--daemon", "--job", "a b'c"};

TEST(LaunchAgent, NetnsAgentGetsWordsUnquoted) {
  auto argv = agent_argv("ip netns exec {host}", "ns1", kDaemon);
  std::vector<std::string> want = {"ip",       "netns", "exec", "ns1", "/opt/sparkrun",
                                   "--daemon", "--job", "a b'c"};
  EXPECT_EQ(argv, want);
}

TEST(LaunchAgent, SshGetsHostAppendedAndShellQuotedWords) {
  auto argv = agent_argv(kDefaultLaunchAgent, "spark2", kDaemon);
  ASSERT_GE(argv.size(), 5u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[3], "spark2");
  EXPECT_EQ(argv[4], "'/opt/sparkrun'");
  EXPECT_EQ(argv.back(), "'a b'\\''c'");
  auto plain = agent_argv("/usr/bin/ssh -p 2222", "h", {"x"});
  EXPECT_EQ(plain, (std::vector<std::string>{"/usr/bin/ssh", "-p", "2222", "h", "'x'"}));
}

TEST(LaunchAgent, SplittingIsStrict) {
  EXPECT_EQ(split_agent_command("a 'b c' \"d e\" f\\ g"),
            (std::vector<std::string>{"a", "b c", "d e", "f g"}));
  EXPECT_THROW(split_agent_command("a 'b"), UsageError);
  EXPECT_THROW(split_agent_command("   "), UsageError);
  EXPECT_EQ(agent_argv("srun -w {host} --nodelist={host}", "n1", {}),
            (std::vector<std::string>{"srun", "-w", "n1", "--nodelist=n1"}));
}

TEST(ControlAddress, Cidr) {
  EXPECT_TRUE(in_cidr("10.1.2.3", "10.1.2.0/24"));
  EXPECT_FALSE(in_cidr("10.1.3.3", "10.1.2.0/24"));
  EXPECT_TRUE(in_cidr("192.168.7.1", "0.0.0.0/0"));
  EXPECT_THROW(in_cidr("10.1.2.3", "10.1.2.0"), UsageError);
  EXPECT_THROW(in_cidr("10.1.2.3", "10.1.2.0/33"), UsageError);
  EXPECT_THROW(in_cidr("10.1.2.3", "10.1.2.0/2x"), UsageError);
}

TEST(ControlAddress, LoopbackAndErrors) {
  auto a = choose_control_addresses("127.0.0.0/8", {"x", "y"}, {false, false});
  EXPECT_EQ(a.listen, "127.0.0.1");
  EXPECT_EQ(a.connect, (std::vector<std::string>{"127.0.0.1", "127.0.0.1"}));
  EXPECT_EQ(choose_control_addresses("lo", {"x"}, {false}).listen, "127.0.0.1");
  EXPECT_THROW(choose_control_addresses("203.0.113.0/24", {"x"}, {false}), UsageError);
  EXPECT_THROW(choose_control_addresses("no-such-if0", {"x"}, {false}), UsageError);
  // Without --control-net: the route to the host.
  EXPECT_EQ(choose_control_addresses("", {"127.0.0.1"}, {false}).connect[0], "127.0.0.1");
  try {
    choose_control_addresses("", {"host.invalid"}, {false});
    ADD_FAILURE() << "an unresolvable host was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--control-net"), std::string::npos) << e.what();
  }
}

PlanInput remote_hosts(std::vector<HostSlots> hosts, int np) {
  PlanInput in;
  in.np = np;
  in.hosts = std::move(hosts);
  in.local_cpus = 2;
  in.is_local = [](const std::string&) { return false; };
  return in;
}

TEST(MapBy, SlotFillsHostsInOrderNodeGoesRoundRobin) {
  auto in = remote_hosts({{"a", 2, true}, {"b", 2, true}, {"c", 1, true}}, 5);
  JobPlan bs = make_job_plan(in);
  ASSERT_EQ(bs.nodes.size(), 3u);
  EXPECT_EQ(bs.nodes[0].ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(bs.nodes[2].ranks, (std::vector<int>{4}));
  EXPECT_FALSE(bs.nodes[0].local);
  in.map_by_node = true;
  JobPlan bn = make_job_plan(in);
  EXPECT_EQ(bn.nodes[0].ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(bn.nodes[1].ranks, (std::vector<int>{1, 4}));
  EXPECT_EQ(bn.nodes[2].ranks, (std::vector<int>{2}));
  EXPECT_EQ(bn.ranks[4].node, 1);
  EXPECT_EQ(bn.ranks[4].local_rank, 1);
  // Oversubscribed by node: round-robin continues past the slots.
  in.np = 7;
  in.oversubscribe = true;
  JobPlan over = make_job_plan(in);
  int total = 0;
  for (const auto& n : over.nodes) total += static_cast<int>(n.ranks.size());
  EXPECT_EQ(total, 7);
  // Fewer ranks than hosts by node: the last host gets none and is not a node.
  in.np = 2;
  in.oversubscribe = false;
  EXPECT_EQ(make_job_plan(in).nodes.size(), 2u);
}

}  // namespace
}  // namespace spark::launch
