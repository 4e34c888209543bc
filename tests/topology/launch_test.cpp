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

// --nccl-env (docs/roce.md): the ranks get the socket interface (every rank here: lo), a value
// the user set wins, and a user's NCCL_IB_HCA naming one PCIe half of a port gets the note.
TEST(SparkrunNcclEnv, RanksGetTheSocketInterfaceUnlessSet) {
  const std::string show =
      " sh -c 'echo \"rank $SPARK_RANK socket=$NCCL_SOCKET_IFNAME gloo=$GLOO_SOCKET_IFNAME "
      "hca=${NCCL_IB_HCA-unset}\"'";
  Result r = sparkrun("-n 2 --nccl-env" + show);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int rank : {0, 1}) {
    const std::string rank_s = std::to_string(rank);
    if (r.err.find("no RDMA device found") != std::string::npos) {
      EXPECT_NE(r.out.find("rank " + rank_s + " socket=lo gloo=lo hca=unset\n"), std::string::npos)
          << r.out;
    } else {  // a machine with RDMA lanes names them (exactly)
      EXPECT_NE(r.out.find("rank " + rank_s + " socket=lo gloo=lo hca=="), std::string::npos)
          << r.out;
    }
  }
  Result mine =
      sparkrun("-n 2 --nccl-env -x NCCL_SOCKET_IFNAME=eth7" + show, "GLOO_SOCKET_IFNAME=eth8");
  ASSERT_EQ(mine.code, 0) << mine.err;
  EXPECT_NE(mine.out.find("rank 1 socket=eth7 gloo=eth8 "), std::string::npos) << mine.out;
  Result off = sparkrun("-n 1" + show);
  EXPECT_NE(off.out.find("rank 0 socket= gloo= hca=unset\n"), std::string::npos) << off.out;
  EXPECT_EQ(off.err.find("--nccl-env"), std::string::npos) << off.err;

  // A Spark planned from here, the user naming one half: their value stays, with the note.
  Result half =
      sparkrun("-n 2 --topology tests/data/spark.xml --nccl-env" + show, "NCCL_IB_HCA=rocep1s0f0");
  ASSERT_EQ(half.code, 0) << half.err;
  EXPECT_NE(half.out.find("rank 1 socket=lo gloo=lo hca=rocep1s0f0\n"), std::string::npos)
      << half.out;
  EXPECT_NE(half.err.find("sparkrun: note: NCCL_IB_HCA=rocep1s0f0 names one PCIe half of a CX7 "
                          "port (rocep1s0f0); name both (rocep1s0f0,roceP2p1s0f0) for full "
                          "bandwidth (~24 vs ~3 GB/s)\n"),
            std::string::npos)
      << half.err;
}

// `sparkrun topo --nccl-env` prints the lines a rank on that machine gets; the GID index
// comes from the device's GID table (a fixture tree here: this machine has no RDMA device).
TEST(SparkrunNcclEnv, TopoPrintsTheLinesForAHost) {
  namespace fs = std::filesystem;
  const fs::path ib = fs::temp_directory_path() / ("spark-topo-ib-" + std::to_string(getpid()));
  for (const char* dev : {"rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"}) {
    const fs::path port = ib / dev / "ports" / "1";
    fs::create_directories(port / "gids");
    fs::create_directories(port / "gid_attrs" / "types");
    std::ofstream(port / "gids" / "3") << "0000:0000:0000:0000:0000:ffff:0a32:0001\n";
    std::ofstream(port / "gid_attrs" / "types" / "3") << "RoCE v2\n";
  }
  Result r = sparkrun(
      "topo --topology tests/data/spark.xml --nccl-env -n 2 --control-net enP7s7 "
      "--ib-sysfs " +
      ib.string());
  fs::remove_all(ib);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "# local rank 0\n"
            "NCCL_IB_HCA==rocep1s0f0,roceP2p1s0f0\n"
            "NCCL_IB_GID_INDEX=3\n"
            "NCCL_SOCKET_IFNAME=enP7s7\n"
            "GLOO_SOCKET_IFNAME=enP7s7\n"
            "# local rank 1\n"
            "NCCL_IB_HCA==rocep1s0f1,roceP2p1s0f1\n"
            "NCCL_IB_GID_INDEX=3\n"
            "NCCL_SOCKET_IFNAME=enP7s7\n"
            "GLOO_SOCKET_IFNAME=enP7s7\n");
  EXPECT_EQ(r.err, "");
  // One half named: the note, on stderr.
  Result half = sparkrun("topo --topology tests/data/spark.xml --nccl-env --ib-sysfs /nonexistent",
                         "NCCL_IB_HCA=roceP2p1s0f0");
  ASSERT_EQ(half.code, 0) << half.err;
  EXPECT_NE(half.out.find("NCCL_IB_HCA==roceP2p1s0f0\n"), std::string::npos) << half.out;
  EXPECT_NE(half.err.find("names one PCIe half of a CX7 port (roceP2p1s0f0); name both "
                          "(roceP2p1s0f0,rocep1s0f0)"),
            std::string::npos)
      << half.err;
  EXPECT_NE(half.err.find("no GID index for roceP2p1s0f0"), std::string::npos) << half.err;
  EXPECT_EQ(sparkrun("topo -n 2").code, 2);  // -n goes with --nccl-env
  EXPECT_EQ(sparkrun("topo --nccl-env --control-net no-such-if0").code, 2);
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
