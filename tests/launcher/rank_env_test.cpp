#include <gtest/gtest.h>

#include <algorithm>

#include "ompi_direct_launch.hpp"
#include "rank_env.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

bool has(const std::vector<std::string>& env, const std::string& entry) {
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(RankEnv, IdentityVariables) {
  RankIdentity id;
  id.rank = 2;
  id.size = 3;
  id.local_rank = 1;
  id.local_size = 2;
  id.node_rank = 1;
  id.job_id = "job7";
  id.host = "spark2";
  auto env = build_env({}, {identity_env(id)});
  for (const char* e : {"SPARK_RANK=2", "SPARK_SIZE=3", "SPARK_LOCAL_RANK=1", "SPARK_LOCAL_SIZE=2",
                        "SPARK_NODE_RANK=1", "SPARK_JOB_ID=job7", "SPARK_HOST=spark2"}) {
    EXPECT_TRUE(has(env, e)) << e;
  }
  EXPECT_EQ(env.size(), 7u);  // no SPARK_CPUSET / SPARK_LANES when unbound
  id.cpuset = "15-19";
  id.lanes = "rocep1s0f0,roceP2p1s0f0";
  env = build_env({}, {identity_env(id)});
  EXPECT_TRUE(has(env, "SPARK_CPUSET=15-19"));
  EXPECT_TRUE(has(env, "SPARK_LANES=rocep1s0f0,roceP2p1s0f0"));
}

TEST(RankEnv, LaterLayersWinAndOrderIsKept) {
  auto env = build_env({"PATH=/bin", "SPARK_RANK=9", "HOME=/root", "broken"},
                       {{{"FOO", "1"}}, {{"SPARK_RANK", "0"}, {"FOO", "2"}}});
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "SPARK_RANK=0", "HOME=/root", "FOO=2"}));
}

TEST(RankEnv, Exports) {
  std::vector<std::string> environment = {"HOME=/root", "EMPTY=", "X=a=b"};
  EXPECT_EQ(resolve_export("HOME", environment), (EnvVar{"HOME", "/root"}));
  EXPECT_EQ(resolve_export("EMPTY", environment), (EnvVar{"EMPTY", ""}));
  EXPECT_EQ(resolve_export("X", environment), (EnvVar{"X", "a=b"}));
  EXPECT_EQ(resolve_export("NEW=v=w", environment), (EnvVar{"NEW", "v=w"}));
  EXPECT_EQ(resolve_export("NEW=", environment), (EnvVar{"NEW", ""}));
  EXPECT_THROW(resolve_export("UNSET_VAR", environment), UsageError);
  EXPECT_THROW(resolve_export("", environment), UsageError);
  EXPECT_THROW(resolve_export("=v", environment), UsageError);
  EXPECT_THROW(resolve_export("1X=v", environment), UsageError);
  EXPECT_THROW(resolve_export("A-B=v", environment), UsageError);
}

TEST(RankEnv, OpenMpiGlueIsContained) {
  auto unbound = open_mpi_direct_launch_env(false);
  for (const auto& [name, value] : unbound) EXPECT_EQ(name.rfind("OMPI_MCA_", 0), 0u) << name;
  auto env = build_env({}, {unbound});
  EXPECT_TRUE(has(env, "OMPI_MCA_ess=pmi"));
  EXPECT_FALSE(has(env, "OMPI_MCA_orte_externally_bound=1"));
  env = build_env({}, {open_mpi_direct_launch_env(true)});
  EXPECT_TRUE(has(env, "OMPI_MCA_orte_externally_bound=1"));
}

TEST(RankEnv, TorchrunVariables) {
  RankIdentity id;
  id.rank = 4;
  id.size = 6;
  id.local_rank = 1;
  id.local_size = 3;
  id.node_rank = 1;
  const auto env = build_env({}, {torchrun_env(id, {}, {})});
  for (const char* want :
       {"RANK=4", "LOCAL_RANK=1", "WORLD_SIZE=6", "LOCAL_WORLD_SIZE=3", "GROUP_RANK=1"})
    EXPECT_TRUE(has(env, want)) << want;
  // The user's value wins: set in sparkrun's environment or with -x, it is left out.
  const auto mine = torchrun_env(id, {"RANK=9", "RANKS=1"}, {{"WORLD_SIZE", "7"}});
  for (const auto& [name, value] : mine) {
    EXPECT_NE(name, "RANK");
    EXPECT_NE(name, "WORLD_SIZE");
  }
  EXPECT_EQ(mine.size(), 3u);  // RANKS=1 is another name: LOCAL_RANK etc. stay

  const auto master = torchrun_master_env("10.0.0.1", 29500, {}, {});
  EXPECT_EQ(master,
            (std::vector<EnvVar>{
                {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"USE_LIBUV", "0"}}));
  EXPECT_EQ(torchrun_master_env("10.0.0.1", 29500, {"MASTER_PORT=1234", "USE_LIBUV=1"}, {}),
            (std::vector<EnvVar>{{"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_TRUE(torchrun_master_env("a", 1, {},
                                  {{"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"}, {"USE_LIBUV", "1"}})
                  .empty());
  // --max-restarts: SPARK_RESTART_COUNT is always sparkrun's; torchrun's two unless set.
  EXPECT_EQ(restart_env(2, 3, {}, {}), (std::vector<EnvVar>{{"SPARK_RESTART_COUNT", "2"},
                                                            {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                            {"TORCHELASTIC_MAX_RESTARTS", "3"}}));
  EXPECT_EQ(restart_env(0, 0, {"TORCHELASTIC_MAX_RESTARTS=5", "SPARK_RESTART_COUNT=7"},
                        {{"TORCHELASTIC_RESTART_COUNT", "1"}}),
            (std::vector<EnvVar>{{"SPARK_RESTART_COUNT", "0"}}));
  const int port = pick_free_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

}  // namespace
}  // namespace spark::launch
