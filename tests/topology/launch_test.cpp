// sparkrun with binding (integration): a Spark's plan shown from this machine, real binding
// read back by the ranks, `sparkrun topo`, and refused requests.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `env_prefix sparkrun args` through sh, stdout and stderr into files.
Result sparkrun(const std::string& args, const std::string& env_prefix = "") {
  auto dir = std::filesystem::temp_directory_path() / ("spark-launch-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string cmd = "cd " SPARK_SOURCE_DIR " && " + env_prefix + " timeout 60 " SPARKRUN_PATH " " +
                    args + " >" + (dir / "out").string() + " 2>" + (dir / "err").string() +
                    " </dev/null";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

TEST(SparkrunBinding, ShowsTheSparkPlanFromAnyMachine) {
  Result r = sparkrun("-n 3 --topology tests/data/spark.xml --report-bindings /bin/true");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string host = [] {
    char buf[256] = {};
    gethostname(buf, sizeof buf - 1);
    return std::string(buf);
  }();
  auto row = [&](int rank, const char* cores, const char* lanes) {
    return "sparkrun: " + host + std::string(host.size() < 4 ? 4 - host.size() : 0, ' ') + "  " +
           std::to_string(rank) + "     " + cores + "  Cortex-X925  L3#1 16MB  " + lanes + "\n";
  };
  EXPECT_NE(r.err.find(row(0, "15-16", "rocep1s0f0,roceP2p1s0f0")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(row(1, "17-18", "rocep1s0f1,roceP2p1s0f1")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(row(2, "19   ", "rocep1s0f0,roceP2p1s0f0")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sparkrun: note: binding planned for tests/data/spark.xml, not this "
                       "machine; ranks run here unbound\n"),
            std::string::npos)
      << r.err;
}

TEST(SparkrunBinding, RanksAreReallyBound) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int n = cpus >= 2 ? 2 : 1;
  Result r = sparkrun("-n " + std::to_string(n) +
                      " --bind-to core sh -c 'echo \"rank $SPARK_LOCAL_RANK cpuset $SPARK_CPUSET "
                      "allowed $(grep Cpus_allowed_list /proc/self/status | cut -f2)\"'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int seen = 0;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string w_rank, rank, w_cpuset, cpuset, w_allowed, allowed;
    words >> w_rank >> rank >> w_cpuset >> cpuset >> w_allowed >> allowed;
    ASSERT_EQ(w_allowed, "allowed") << "SPARK_CPUSET missing in: " << line;
    EXPECT_EQ(cpuset, allowed) << line;
    ++seen;
  }
  EXPECT_EQ(seen, n) << r.out;
}

TEST(SparkrunBinding, TopoSubcommand) {
  Result r = sparkrun("topo --topology tests/data/spark-wrong-cpukinds.xml");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("decided by MIDR part number; hwloc cpukinds disagree"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fast cores: 5-9,15-19\n"), std::string::npos) << r.out;
  Result live = sparkrun("topo");
  ASSERT_EQ(live.code, 0) << live.err;
  EXPECT_NE(live.out.find("machine: this machine\n"), std::string::npos) << live.out;
  EXPECT_EQ(sparkrun("topo --bogus").code, 2);
  EXPECT_EQ(sparkrun("topo --topology /nonexistent.xml").code, 2);
}

TEST(SparkrunBinding, RefusedRequestsStartNothing) {
  Result bad = sparkrun("--bind-to fastest /bin/echo started");
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.out, "");
  EXPECT_NE(bad.err.find("--bind-to \"fastest\" is not one of: fast, core, l3, none"),
            std::string::npos)
      << bad.err;
  // The ranks use RDMA lanes (SPARK_TRANSPORT=roce), so the HCA names are resolved.
  Result hca = sparkrun("--topology tests/data/spark.xml /bin/echo started",
                        "SPARK_IB_HCA=mlx5_9 SPARK_TRANSPORT=roce");
  EXPECT_EQ(hca.code, 2);
  EXPECT_EQ(hca.out, "");
  EXPECT_NE(hca.err.find("SPARK_IB_HCA=\"mlx5_9\": no HCA named \"mlx5_9\" on this machine; "
                         "existing HCAs: rocep1s0f0"),
            std::string::npos)
      << hca.err;
}

// A stale NCCL_IB_HCA / SPARK_IB_HCA does not stop a job that uses no RDMA lanes: one node (its
// ranks use shared memory) or SPARK_TRANSPORT=tcp; --report-bindings says it was not used.
TEST(SparkrunBinding, HcaNamesAreCheckedOnlyWhenRdmaLanesAreUsed) {
  Result none = sparkrun("-n 2 --bind-to none /bin/echo started", "NCCL_IB_HCA=mlx5");
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "started\nstarted\n");
  Result tcp = sparkrun("-n 2 /bin/echo started", "NCCL_IB_HCA=mlx5 SPARK_TRANSPORT=tcp");
  EXPECT_EQ(tcp.code, 0) << tcp.err;
  EXPECT_EQ(tcp.out, "started\nstarted\n");
  Result shown = sparkrun("-n 2 --report-bindings --topology tests/data/spark.xml /bin/true",
                          "SPARK_IB_HCA=mlx5 SPARK_TRANSPORT=shm");
  EXPECT_EQ(shown.code, 0) << shown.err;
  EXPECT_NE(shown.err.find("SPARK_IB_HCA=\"mlx5\" not used: no rank of this job uses RDMA lanes "
                           "(SPARK_TRANSPORT=shm)"),
            std::string::npos)
      << shown.err;
}

}  // namespace

#ifdef SPARK_PMIX_CPUSET_CLIENT
namespace {

// PMIx clients see the binding too: PMIX_CPUSET equals SPARK_CPUSET and the affinity.
// (No PMIX_LOCALITY_STRING: generating it crashed PMIx 4.2.2 here.)
TEST(SparkrunBinding, PmixCpusetMatches) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const int n = cpus >= 2 ? 2 : 1;
  Result r = sparkrun("-n " + std::to_string(n) + " --bind-to core " SPARK_PMIX_CPUSET_CLIENT);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int seen = 0;
  while (std::getline(lines, line)) {
    std::istringstream w(line);
    std::string k1, rank, k2, pmix, k3, locality, k4, spark, k5, allowed;
    w >> k1 >> rank >> k2 >> pmix >> k3 >> locality >> k4 >> spark >> k5 >> allowed;
    EXPECT_EQ(pmix, spark) << line;
    EXPECT_EQ(spark, allowed) << line;
    ++seen;
  }
  EXPECT_EQ(seen, n) << r.out << r.err;
}

}  // namespace
#endif
