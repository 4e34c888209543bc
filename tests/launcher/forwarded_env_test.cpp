// The environment rule (launcher/src/plan/forwarded_env.hpp): what reaches every rank on
// every host.
#include "forwarded_env.hpp"

#include <gtest/gtest.h>

#include <map>

#include "usage_error.hpp"

namespace spark::launch {
namespace {

std::map<std::string, std::string> as_map(const std::vector<EnvVar>& vars) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : vars) {
    EXPECT_TRUE(m.emplace(k, v).second) << k << " sent twice";
  }
  return m;
}

const std::vector<std::string> kEnv = {"PATH=/usr/bin",
                                       "HOME=/root",
                                       "HOSTNAME=spark1",
                                       "PWD=/work/job",
                                       "OLDPWD=/",
                                       "SHLVL=2",
                                       "_=/usr/bin/sparkrun",
                                       "SSH_CONNECTION=1 2 3 4",
                                       "SSH_AUTH_SOCK=/tmp/a",
                                       "TMPDIR=/tmp/job7",
                                       "DISPLAY=:0",
                                       "XDG_RUNTIME_DIR=/run/user/0",
                                       "SLURM_NODEID=0",
                                       "PMIX_RANK=3",
                                       "SPARK_TRANSPORT=tcp",
                                       "SPARKNET_ROCE_TIMEOUT_MS=1234",
                                       "SPARK_RANK=5",
                                       "SPARK_LANES=mlx5_0",
                                       "NCCL_DEBUG=INFO",
                                       "NCCL_IB_HCA=mlx5",
                                       "FOO_A=1",
                                       "FOO_B=2",
                                       "FOOD=3",
                                       "broken"};

TEST(ForwardedEnv, SparkVariablesAlwaysButNotTheIdentity) {
  const auto m = as_map(forwarded_env(kEnv, {}, false).vars);
  EXPECT_EQ(m, (std::map<std::string, std::string>{{"SPARK_TRANSPORT", "tcp"},
                                                   {"SPARKNET_ROCE_TIMEOUT_MS", "1234"}}));
}

TEST(ForwardedEnv, NamesValuesAndPatterns) {
  const auto f = forwarded_env(kEnv, {"HOME", "X=y=z", "FOO_*", "NCCL_?B_HCA"}, false);
  EXPECT_TRUE(f.warnings.empty());
  const auto m = as_map(f.vars);
  EXPECT_EQ(m.at("HOME"), "/root");
  EXPECT_EQ(m.at("X"), "y=z");
  EXPECT_EQ(m.at("FOO_A"), "1");
  EXPECT_EQ(m.at("FOO_B"), "2");
  EXPECT_EQ(m.count("FOOD"), 0u);  // FOO_* needs the underscore
  EXPECT_EQ(m.at("NCCL_IB_HCA"), "mlx5");
  EXPECT_EQ(m.count("NCCL_DEBUG"), 0u);
  EXPECT_EQ(m.count("PATH"), 0u);
}

TEST(ForwardedEnv, LaterEntriesWinAndNamesStayUnique) {
  const auto f = forwarded_env(kEnv, {"SPARK_TRANSPORT=shm", "FOO_A=9", "FOO_*"}, false);
  const auto m = as_map(f.vars);
  EXPECT_EQ(m.at("SPARK_TRANSPORT"), "shm");           // -x over the environment
  EXPECT_EQ(m.at("FOO_A"), "1");                       // the pattern came last
  EXPECT_EQ(f.vars.front().first, "SPARK_TRANSPORT");  // first position kept
}

TEST(ForwardedEnv, PatternMatchingNothingWarnsWithItsName) {
  const auto f = forwarded_env(kEnv, {"UCX_*"}, false);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("-x 'UCX_*' matches no variable"), std::string::npos);
}

TEST(ForwardedEnv, UnsetNameAndBadNameAreUsageErrors) {
  EXPECT_THROW((void)forwarded_env(kEnv, {"NOSUCH"}, false), UsageError);
  EXPECT_THROW((void)forwarded_env(kEnv, {"1BAD=x"}, false), UsageError);
}

TEST(ForwardedEnv, EnvAllLeavesTheHostsOwnVariables) {
  const auto m = as_map(forwarded_env(kEnv, {}, true).vars);
  for (const char* sent : {"PATH", "HOME", "NCCL_DEBUG", "FOOD", "SPARK_TRANSPORT"})
    EXPECT_EQ(m.count(sent), 1u) << sent;
  for (const char* kept : {"HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "SSH_CONNECTION",
                           "SSH_AUTH_SOCK", "TMPDIR", "DISPLAY", "XDG_RUNTIME_DIR", "SLURM_NODEID",
                           "PMIX_RANK", "SPARK_RANK", "SPARK_LANES", "broken"})
    EXPECT_EQ(m.count(kept), 0u) << kept;
  // Named with -x, a host-specific variable is sent all the same.
  EXPECT_EQ(as_map(forwarded_env(kEnv, {"TMPDIR"}, true).vars).at("TMPDIR"), "/tmp/job7");
}

TEST(ForwardedEnv, TheXPartAloneForPrintConfig) {
  const auto m = as_map(resolve_x_args(kEnv, {"FOO_*", "SPARK_TCP_LANES=2"}).vars);
  EXPECT_EQ(m, (std::map<std::string, std::string>{
                   {"FOO_A", "1"}, {"FOO_B", "2"}, {"SPARK_TCP_LANES", "2"}}));
}

TEST(ForwardedEnv, TheRuleNames) {
  EXPECT_TRUE(is_sparkrun_variable("SPARK_TCP_LANES"));
  EXPECT_TRUE(is_sparkrun_variable("SPARKNET_ROCE_TIMEOUT_MS"));
  EXPECT_FALSE(is_sparkrun_variable("SPARK_LOCAL_RANK"));
  EXPECT_FALSE(is_sparkrun_variable("SPARKY"));
  EXPECT_TRUE(is_host_specific("SSH_TTY"));
  EXPECT_FALSE(is_host_specific("HOME"));
}

}  // namespace
}  // namespace spark::launch
