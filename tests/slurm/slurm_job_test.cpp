// Tests against a real one-node SLURM cluster (slurm_cluster.sh, started by the CTest fixture
// "slurm_cluster", which sets SLURM_CONF). Each test runs real srun / salloc / sbatch
// commands and checks their exit status, stdout and stderr.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "slurm_allocation.hpp"
#include "slurm_hostlist.hpp"

#ifndef SPARK_PMIX_PROBE
#define SPARK_PMIX_PROBE ""
#endif
#ifndef SPARK_SPARKRUN
#define SPARK_SPARKRUN ""
#endif
#ifndef SPARK_LIBSPARK_APP
#define SPARK_LIBSPARK_APP ""
#endif
#ifndef SPARK_SHARDED_INFER
#define SPARK_SHARDED_INFER ""
#endif

namespace fs = std::filesystem;

namespace {

struct Result {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
  double seconds = 0;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

std::string short_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

class SlurmJob : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* conf = std::getenv("SLURM_CONF");
    if (conf == nullptr || !fs::exists(conf)) {
      GTEST_SKIP() << "no test cluster: run through CTest (fixture slurm_cluster starts one "
                      "with tests/slurm/slurm_cluster.sh and sets SLURM_CONF)";
    }
    // If CTest itself runs inside an allocation, its SLURM_JOB_ID etc. must not leak into
    // the test cluster's commands (srun would try to join that foreign job).
    for (const char* v : {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                          "SLURM_TASKS_PER_NODE", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_ID",
                          "SLURM_CPUS_ON_NODE", "SLURMD_NODENAME"}) {
      unsetenv(v);
    }
    char tmpl[] = "/tmp/spark-slurm-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // Runs `cmd` with /bin/sh; a 100 s timeout guarantees the test ends even if a job hangs.
  Result sh(const std::string& cmd) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string full = "cd '" + dir_.string() + "' && timeout -k 5 100 sh -c '" + cmd +
                             "' >'" + out.string() + "' 2>'" + err.string() + "'";
    const auto t0 = std::chrono::steady_clock::now();
    const int raw = std::system(full.c_str());
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // `sbatch --wait ARGS`, without its cost: sbatch --wait asks slurmctld about the job every
  // 2 s (SLURM 22.05), so every batch test took 2-4 s. This submits with --parsable and
  // polls `scontrol -o show job` every 0.1 s (bounded: 100 s) until the job has ended
  // (COMPLETING is not yet the end: the node still cleans up). Like sbatch --wait --parsable:
  // status is the job's exit code (128 + signal), out the job id line, err sbatch's stderr.
  // No -Q in ARGS: sbatch -Q --parsable prints no job id.
  Result sbatch_wait(const std::string& args, const std::string& prefix = "") {
    const auto t0 = std::chrono::steady_clock::now();
    Result sub = sh(prefix + "sbatch --parsable " + args);
    if (sub.status != 0) return sub;
    const std::string id = sub.out.substr(0, sub.out.find_first_of(";\n"));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      sub.status = -1;
      sub.err += "sbatch_wait: no job id from sbatch --parsable\n";
      return sub;
    }
    const std::regex state_re("JobState=([A-Z_]+)"), exit_re("ExitCode=([0-9]+):([0-9]+)");
    for (int i = 0; i < 1000; ++i) {
      const Result show = sh("scontrol -o show job " + id);
      std::smatch state, code;
      if (show.status == 0 && std::regex_search(show.out, state, state_re) &&
          std::regex_search(show.out, code, exit_re)) {
        const std::string st = state[1].str();
        if (st != "PENDING" && st != "CONFIGURING" && st != "RUNNING" && st != "COMPLETING" &&
            st != "SUSPENDED" && st != "REQUEUED" && st != "RESIZING") {
          const int signal = std::stoi(code[2].str());
          sub.status = signal != 0 ? 128 + signal : std::stoi(code[1].str());
          sub.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          return sub;
        }
      }
      usleep(100 * 1000);
    }
    sub.status = -1;
    sub.err += "sbatch_wait: job " + id + " did not end within 100 s\n";
    return sub;
  }

  static std::string quote(const std::string& s) { return "\"" + s + "\""; }

  fs::path dir_;
};

std::string describe(const Result& r) {
  return "status " + std::to_string(r.status) + " after " + std::to_string(r.seconds) +
         " s\n--- stdout:\n" + r.out + "--- stderr:\n" + r.err;
}

// --- the cluster itself and SLURM's own host-list syntax ---------------------------------

TEST_F(SlurmJob, ScontrolExpandsHostListsLikeSparkrun) {
  for (const std::string list : {"spark[1-3,5]", "a,b[01-02]", "n[098-101]", "n[8-11]",
                                 "rack[1-2]-n[1-2]", "a[1,3-4],b,c[7,09-10]", "n[01-2]"}) {
    const Result r = sh("scontrol show hostnames " + quote(list));
    ASSERT_EQ(r.status, 0) << list << ": " << describe(r);
    std::vector<std::string> slurm;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) slurm.push_back(line);
    EXPECT_EQ(spark::launch::slurm::expand_hostlist(list), slurm) << list;
  }
}

TEST_F(SlurmJob, SallocAllocationIsReadAsSlurmSetsIt) {
  const Result r = sh(std::string("salloc -Q -n 3 ") + SPARK_ALLOCATION_PROBE);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_TRUE(std::regex_search(r.out, std::regex("^job=[0-9]+$", std::regex::multiline))) << r.out;
  EXPECT_NE(r.out.find("nodes=" + short_hostname() + ":3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ntasks=3\n"), std::string::npos) << r.out;
}

TEST_F(SlurmJob, SbatchAllocationIsReadInsideTheBatchScript) {
  const Result r =
      sbatch_wait(std::string("-n 2 --output=probe.out --wrap ") + quote(SPARK_ALLOCATION_PROBE));
  ASSERT_EQ(r.status, 0) << describe(r);
  const std::string out = slurp(dir_ / "probe.out");
  EXPECT_NE(out.find("nodes=" + short_hostname() + ":2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("ntasks=2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("this_node=" + short_hostname() + "\n"), std::string::npos) << out;
  // Batch scripts get SLURM_CPUS_ON_NODE (salloc's shell does not).
  EXPECT_TRUE(std::regex_search(out, std::regex("^cpus_on_node=[0-9]+$", std::regex::multiline)))
      << out;
}

// --- direction 1: srun --mpi=pmix, SLURM's own PMIx server, no sparkrun ------------------

TEST_F(SlurmJob, SrunPmixThreeRanksExchangeThroughSlurmsPmixServer) {
  const Result r = sh(std::string("srun --mpi=pmix -n 3 ") + SPARK_PMIX_PROBE);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(lines_with(r.out, "rank " + std::to_string(rank) + " of 3: ok sum 6").size(), 1u)
        << describe(r);
  }
}

TEST_F(SlurmJob, SrunPmixAbortEndsTheStepWithTheRecordOnStderr) {
  const Result r = sh(std::string("srun --mpi=pmix -n 3 ") + SPARK_PMIX_PROBE + " --abort-rank 1");
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_LT(r.status, 100) << "srun ended by the test's timeout, not by the abort: " << describe(r);
  EXPECT_EQ(lines_with(r.err, "rank 1: allreduce seq 1 step 0: no data from rank 2").size(), 1u)
      << describe(r);
}

TEST_F(SlurmJob, SrunPmixDeadRankEndsTheStepWithKillOnBadExit) {
  const Result r =
      sh(std::string("srun -K --mpi=pmix -n 3 ") + SPARK_PMIX_PROBE + " --exit-rank 2");
  EXPECT_EQ(r.status, 3) << "srun should exit with the dead rank's status: " << describe(r);
  EXPECT_EQ(lines_with(r.err, "task 2: Exited with exit code 3").size(), 1u) << describe(r);
}

class LibsparkUnderSlurm : public SlurmJob {
 protected:
  void SetUp() override {
    SlurmJob::SetUp();
    if (IsSkipped()) return;
    if (std::string(SPARK_LIBSPARK_APP).empty()) GTEST_SKIP() << "libspark is not built";
  }
};

TEST_F(LibsparkUnderSlurm, SrunPmixCollectivesAreCorrectOnThreeRanks) {
  const Result r = sh(std::string("srun --mpi=pmix -n 3 ") + SPARK_LIBSPARK_APP);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(lines_with(r.out, "rank " + std::to_string(rank) + " of 3: collectives ok").size(),
              1u)
        << describe(r);
  }
}

TEST_F(LibsparkUnderSlurm, SrunPmixFailStopEndsTheStepWithTheRecordOnStderr) {
  // Rank 2 stops answering; ranks 0 and 1 time out after 1 s, libspark aborts through SLURM's
  // PMIx server, SLURM cancels the step (rank 2 included) and srun exits non-zero.
  const Result r = sh(std::string("SPARKNET_ROCE_TIMEOUT_MS=1000 srun --mpi=pmix -n 3 ") +
                      SPARK_LIBSPARK_APP + " --stop-rank 2");
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_LT(r.status, 100) << "srun ended by the test's timeout, not by the abort: " << describe(r);
  EXPECT_LT(r.seconds, 60) << describe(r);
  // The one-line FailureRecord (INTERFACES.md) of at least one waiting rank.
  const auto records = lines_with(r.err, "no data from rank 2");
  ASSERT_GE(records.size(), 1u) << "the fail-stop record is not on stderr: " << describe(r);
  EXPECT_NE(records.front().find("allreduce seq"), std::string::npos) << records.front();
  EXPECT_NE(records.front().find("(timeout 1000 ms)"), std::string::npos) << records.front();
}

// --- direction 2: sparkrun inside an allocation -----------------------------------------

class SparkrunInAllocation : public SlurmJob {
 protected:
  void SetUp() override {
    SlurmJob::SetUp();
    if (IsSkipped()) return;
    if (std::string(SPARK_SPARKRUN).empty()) GTEST_SKIP() << "sparkrun is not built";
  }
};

TEST_F(SparkrunInAllocation, SallocNpDefaultsToTheAllocationAndRanksRunLocally) {
  // No -n, no --host: three ranks because the allocation has three tasks; they reach each
  // other through sparkrun's own PMIx server (not SLURM's: no srun involved).
  const Result r =
      sh(std::string("salloc -Q -n 3 ") + SPARK_SPARKRUN + " --verbose " + SPARK_PMIX_PROBE);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(lines_with(r.out, "rank " + std::to_string(rank) + " of 3: ok sum 6").size(), 1u)
        << describe(r);
  }
  EXPECT_EQ(lines_with(r.err, "sparkrun: SLURM allocation ").size(), 1u) << describe(r);
  EXPECT_EQ(lines_with(r.err, "3 ranks on " + short_hostname() + ":3").size(), 1u) << describe(r);
}

TEST_F(SparkrunInAllocation, SallocTwoTasksGiveTwoRanks) {
  const Result r = sh(std::string("salloc -Q -n 2 ") + SPARK_SPARKRUN + " " + SPARK_PMIX_PROBE);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_with(r.out, " of 2: ok sum 3").size(), 2u) << describe(r);
}

TEST_F(SparkrunInAllocation, NpAboveTheAllocationIsRefusedBeforeAnythingStarts) {
  const Result r =
      sh(std::string("salloc -Q -n 2 ") + SPARK_SPARKRUN + " -n 3 " + SPARK_PMIX_PROBE);
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(lines_with(r.err, "-n 3 is more than the 2 tasks of SLURM allocation").size(), 1u)
      << describe(r);
  EXPECT_EQ(r.out, "") << "nothing may start: " << describe(r);
}

TEST_F(SparkrunInAllocation, SallocLibsparkCollectivesUnderSparkrun) {
  if (std::string(SPARK_LIBSPARK_APP).empty()) GTEST_SKIP() << "libspark is not built";
  const Result r = sh(std::string("salloc -Q -n 3 ") + SPARK_SPARKRUN + " " + SPARK_LIBSPARK_APP);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_with(r.out, " of 3: collectives ok").size(), 3u) << describe(r);
}

TEST_F(SparkrunInAllocation, SallocFailStopRecordIsPrintedBySparkrun) {
  if (std::string(SPARK_LIBSPARK_APP).empty()) GTEST_SKIP() << "libspark is not built";
  const Result r = sh(std::string("SPARKNET_ROCE_TIMEOUT_MS=1000 salloc -Q -n 3 ") +
                      SPARK_SPARKRUN + " " + SPARK_LIBSPARK_APP + " --stop-rank 2");
  EXPECT_EQ(r.status, 1) << describe(r);
  const auto records = lines_with(r.err, "no data from rank 2");
  ASSERT_GE(records.size(), 1u) << describe(r);
  EXPECT_EQ(records.front().rfind("sparkrun: ", 0), 0u) << records.front();
}

TEST_F(SparkrunInAllocation, SallocAbortWhileOthersWaitInAFenceEndsTheJob) {
  // Ranks 0 and 2 sit in a PMIx fence that rank 1 never joins; its PMIx_Abort must end them.
  const Result r = sh(std::string("salloc -Q -n 3 ") + SPARK_SPARKRUN + " " + SPARK_PMIX_PROBE +
                      " --abort-rank 1");
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_GE(lines_with(r.err, "sparkrun: rank 1").size(), 1u) << describe(r);
  EXPECT_EQ(lines_with(r.err, "rank 1: allreduce seq 1 step 0: no data from rank 2").size() > 0,
            true)
      << describe(r);
}

TEST_F(SparkrunInAllocation, SbatchScriptRunsSparkrunOnTheBatchNode) {
  std::ofstream(dir_ / "job.sh") << "#!/bin/sh\n#SBATCH --ntasks=3\n"
                                 << SPARK_SPARKRUN << " --tag-output " << SPARK_PMIX_PROBE << "\n";
  const Result r = sbatch_wait("--output=job.out job.sh");
  const std::string out = slurp(dir_ / "job.out");
  ASSERT_EQ(r.status, 0) << describe(r) << "--- job.out:\n" << out;
  EXPECT_EQ(lines_with(out, " of 3: ok sum 6").size(), 3u) << out;
}

TEST_F(SparkrunInAllocation, SbatchFailStopRecordIsInTheJobOutputAndTheJobFails) {
  if (std::string(SPARK_LIBSPARK_APP).empty()) GTEST_SKIP() << "libspark is not built";
  std::ofstream(dir_ / "fail.sh") << "#!/bin/sh\n#SBATCH --ntasks=3\n"
                                  << "export SPARKNET_ROCE_TIMEOUT_MS=1000\n"
                                  << SPARK_SPARKRUN << " " << SPARK_LIBSPARK_APP
                                  << " --stop-rank 2\n";
  const Result r = sbatch_wait("--output=fail.out fail.sh");
  const std::string out = slurp(dir_ / "fail.out");
  EXPECT_EQ(r.status, 1) << "the job's exit code: " << describe(r) << out;
  const auto records = lines_with(out, "no data from rank 2");
  ASSERT_GE(records.size(), 1u) << out;
  EXPECT_EQ(records.front().rfind("sparkrun: rank ", 0), 0u) << records.front();
  // SLURM's own view of the job (kept for MinJobAge seconds after it ends).
  std::string job_id = r.out.substr(0, r.out.find_first_of(";\n"));
  const Result show = sh("scontrol show job " + job_id);
  EXPECT_NE(show.out.find("JobState=FAILED"), std::string::npos) << describe(show);
  EXPECT_NE(show.out.find("ExitCode=1:0"), std::string::npos) << describe(show);
}

// The sbatch example of docs/slurm.md, submitted as written (between its markers).
TEST_F(SparkrunInAllocation, DocsSbatchExampleRuns) {
  if (std::string(SPARK_SHARDED_INFER).empty()) GTEST_SKIP() << "libspark is not built";
  const std::string doc = slurp(SPARK_SLURM_DOC);
  const auto begin = doc.find("<!-- sbatch-example:begin -->");
  const auto end = doc.find("<!-- sbatch-example:end -->");
  ASSERT_NE(begin, std::string::npos) << "marker missing in " << SPARK_SLURM_DOC;
  ASSERT_NE(end, std::string::npos) << "marker missing in " << SPARK_SLURM_DOC;
  std::string block = doc.substr(begin, end - begin);
  const auto open = block.find("```bash\n");
  const auto close = block.rfind("```");
  ASSERT_TRUE(open != std::string::npos && close > open) << block;
  const std::string script = block.substr(open + 8, close - open - 8);
  ASSERT_EQ(script.rfind("#!/bin/bash\n", 0), 0u) << script;
  std::ofstream(dir_ / "sharded-infer.sbatch") << script;
  std::ofstream(dir_ / "prompts.txt") << "the capital of France is\nhello world\n"
                                      << "two plus two\nwrite a haiku about RDMA\nfail-stop\n";
  // As a user would have it: sparkrun and the program on PATH.
  const std::string path = fs::path(SPARK_SPARKRUN).parent_path().string() + ":" +
                           fs::path(SPARK_SHARDED_INFER).parent_path().string() + ":$PATH";
  const Result r = sbatch_wait("sharded-infer.sbatch", "PATH=" + path + " ");
  const std::string job_id = r.out.substr(0, r.out.find_first_of(";\n"));
  const std::string out = slurp(dir_ / ("sharded-infer-" + job_id + ".out"));
  ASSERT_EQ(r.status, 0) << describe(r) << "--- job output:\n" << out;
  EXPECT_EQ(
      lines_with(out, "[0] sharded_infer: 5 prompts on 3 shards match the unsharded layer").size(),
      1u)
      << out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(lines_with(out, "[" + std::to_string(rank) + "] sharded_infer: rank " +
                                  std::to_string(rank) + " of 3: shard columns")
                  .size(),
              1u)
        << out;
  }
  EXPECT_EQ(lines_with(out, "results: results-" + job_id + ".tsv").size(), 1u) << out;
  const std::string results = slurp(dir_ / ("results-" + job_id + ".tsv"));
  EXPECT_EQ(lines_with(results, "\t").size(), 5u) << results;
  EXPECT_EQ(lines_with(results, "\twrite a haiku about RDMA").size(), 1u) << results;
}

// Binding stays inside the cpus sparkrun was given (the allocation's cpuset when SLURM
// confines jobs; here `taskset`, since the test cluster runs TaskPlugin=task/none).
TEST_F(SparkrunInAllocation, BindingStaysInsideTheCpusSparkrunWasGiven) {
  const std::vector<int> cpus = spark::launch::slurm::process_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 cpus to leave one out";
  const std::string last = std::to_string(cpus.back());
  const Result r = sh("salloc -Q -n 1 taskset -c " + last + " " + SPARK_SPARKRUN +
                      " --bind-to core " + SPARK_ALLOCATION_PROBE);
  if (r.status == 2 && r.err.find("not available in this build") != std::string::npos) {
    GTEST_SKIP() << "sparkrun has no --bind-to yet: " << r.err;
  }
  ASSERT_EQ(r.status, 0) << describe(r);
  // Rank 0 bound to the first core of the machine would print cpus=0.
  EXPECT_NE(r.out.find("cpus=" + last + "\n"), std::string::npos) << describe(r);
}

}  // namespace

// --- sparkrun inside a multi-node allocation ---------------------------------------------
// The fixture's partition "multi" has nodes sn1, sn2, each a network namespace with its own
// slurmd (slurm_cluster.sh). sparkrun runs where salloc's shell runs (the root namespace: a
// login node outside the allocation) or in the batch script (on sn1), and starts one node
// daemon per node with srun. --control-net names the namespaces' subnet because the node
// names do not resolve in DNS here.

namespace {

std::map<std::string, std::string> read_env_file(const fs::path& p) {
  std::map<std::string, std::string> kv;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

// PIDs of processes whose environment holds `mark` (the test's own marker variable, which
// srun and sbatch pass on to steps: launcher, daemons and ranks all carry it).
std::vector<std::string> marked_processes(const std::string& mark) {
  std::vector<std::string> found;
  const std::string self = std::to_string(getpid());
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid == self)
      continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (env.find(mark) == std::string::npos) continue;
    std::ifstream cl(e.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(cl)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    found.push_back(pid + " " + cmd);
  }
  return found;
}

}  // namespace

class SparkrunMultiNode : public SparkrunInAllocation {
 protected:
  void SetUp() override {
    SparkrunInAllocation::SetUp();
    if (IsSkipped()) return;
    if (std::string(SPARK_LIBSPARK_APP).empty()) GTEST_SKIP() << "libspark is not built";
    const auto env = read_env_file(fs::path(std::getenv("SLURM_CONF")).parent_path() / "multi.env");
    if (env.count("SPARK_SLURM_MULTI_NET") == 0) {
      GTEST_SKIP() << "the test cluster has no multi-node partition (slurm_cluster.sh needs root "
                      "and iproute2 for its network namespaces; SPARK_SLURM_NETNS_NODES=0?)";
    }
    net_ = env.at("SPARK_SLURM_MULTI_NET");
    if (env.count("SPARK_SLURM_MULTI_LAST_NODE_CPU"))
      last_cpu_ = env.at("SPARK_SLURM_MULTI_LAST_NODE_CPU");
    mark_ = "SPARK_SLURM_TEST_MARK=" + dir_.string();
  }
  // sh() with the marker exported, so that every process of the job can be found later.
  Result job(const std::string& cmd) { return sh("export " + mark_ + "; " + cmd); }
  // With --control-net (the namespaces' subnet), or without: then sparkrun asks slurmctld
  // for the NodeAddr of node names that do not resolve (sn1, sn2 are in no DNS).
  std::string sparkrun(bool control_net = true) const {
    return std::string(SPARK_SPARKRUN) + (control_net ? " --control-net " + net_ : "") + " ";
  }
  // Waits (bounded) until no process of the job is left; returns what is left.
  std::vector<std::string> leftovers(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    auto left = marked_processes(mark_);
    while (!left.empty() && std::chrono::steady_clock::now() < end) {
      usleep(100 * 1000);
      left = marked_processes(mark_);
    }
    return left;
  }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x + "\n";
    return s;
  }
  std::string net_, mark_, last_cpu_;
};

TEST_F(SparkrunMultiNode, SallocTwoNodesFourRanksCollectivesAcrossNodes) {
  // No -n: four ranks because the allocation has four tasks, two per node.
  const Result r = job("salloc -Q -p multi -N 2 -n 4 " + sparkrun(false) + "--verbose " +
                       SPARK_LIBSPARK_APP);  // no --control-net: routes to NodeAddr
  ASSERT_EQ(r.status, 0) << describe(r);
  const auto note = lines_with(r.err, "sparkrun: SLURM allocation ");
  ASSERT_EQ(note.size(), 1u) << describe(r);
  EXPECT_NE(note[0].find("4 ranks on sn1:2,sn2:2"), std::string::npos) << note[0];
  EXPECT_NE(note[0].find("; node daemons through srun"), std::string::npos) << note[0];
  EXPECT_EQ(lines_with(r.err, "node daemon connected and authenticated").size(), 2u) << describe(r);
  // srun's own lines: none but the one about --cpu-bind=none on this task/none cluster.
  EXPECT_EQ(lines_with(r.err, "srun: ").size(),
            lines_with(r.err, "srun: cluster configuration lacks support for cpu binding").size())
      << describe(r);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string node = rank < 2 ? "sn1" : "sn2";
    EXPECT_EQ(lines_with(r.out, "rank " + std::to_string(rank) + " of 4: collectives ok on host " +
                                    node + " (slurmd " + node + ")")
                  .size(),
              1u)
        << describe(r);
  }
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));
  std::printf("salloc -N 2 -n 4 sparkrun collectives: %.2f s\n", r.seconds);
}

TEST_F(SparkrunMultiNode, SbatchTwoNodeScript) {
  // The batch script runs on sn1: that node's daemon starts directly, sn2's through srun.
  std::ofstream(dir_ / "multi.sh")
      << "#!/bin/sh\n#SBATCH --partition=multi\n#SBATCH --nodes=2\n"
      << "#SBATCH --ntasks-per-node=1\n"
      << sparkrun(false) << "--tag-output " << SPARK_LIBSPARK_APP << "\n"
      << "echo sparkrun exit $?\n";
  const Result r = sbatch_wait("--output=multi.out multi.sh", "export " + mark_ + "; ");
  const std::string out = slurp(dir_ / "multi.out");
  ASSERT_EQ(r.status, 0) << describe(r) << "--- multi.out:\n" << out;
  EXPECT_EQ(lines_with(out,
                       "[0] slurm_collectives: rank 0 of 2: collectives ok on host sn1 "
                       "(slurmd sn1)")
                .size(),
            1u)
      << out;
  EXPECT_EQ(lines_with(out,
                       "[1] slurm_collectives: rank 1 of 2: collectives ok on host sn2 "
                       "(slurmd sn2)")
                .size(),
            1u)
      << out;
  EXPECT_EQ(lines_with(out, "sparkrun exit 0").size(), 1u) << out;
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));
}

TEST_F(SparkrunMultiNode, KilledRankOnTheOtherNodeEndsTheJobWithNoProcessLeft) {
  // Rank 3 (on sn2) SIGKILLs itself while ranks 0-2 wait for it in an allreduce.
  const Result r =
      job("salloc -Q -p multi -N 2 -n 4 " + sparkrun() + SPARK_LIBSPARK_APP + " --kill-rank 3");
  EXPECT_EQ(r.status, 128 + 9) << "the dead rank's status (128+SIGKILL): " << describe(r);
  EXPECT_GE(lines_with(r.err, "sparkrun: host sn2: rank 3").size(), 1u) << describe(r);
  EXPECT_LT(r.seconds, 60) << describe(r);
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));
}

TEST_F(SparkrunMultiNode, ScancelEndsEveryDaemonAndRank) {
  // Rank 1 (on sn2) stops answering and the others would wait ten minutes: only scancel
  // ends this job. Launcher (on sn1, the batch node), daemons and ranks must all go.
  std::ofstream(dir_ / "hang.sh") << "#!/bin/sh\n#SBATCH --partition=multi\n#SBATCH --nodes=2\n"
                                  << "#SBATCH --ntasks-per-node=1\n"
                                  << "export SPARKNET_ROCE_TIMEOUT_MS=600000\n"
                                  << sparkrun() << SPARK_LIBSPARK_APP << " --stop-rank 1\n";
  const Result sub = job("sbatch --parsable --output=hang.out hang.sh");
  ASSERT_EQ(sub.status, 0) << describe(sub);
  const std::string job_id = sub.out.substr(0, sub.out.find_first_of(";\n"));
  // Running on both nodes once both ranks have printed their line (bounded wait).
  std::string out;
  for (int i = 0; i < 300 && lines_with(out, "collectives ok").size() < 2; ++i) {
    usleep(100 * 1000);
    out = slurp(dir_ / "hang.out");
  }
  ASSERT_EQ(lines_with(out, "collectives ok").size(), 2u) << "the job never ran:\n" << out;
  EXPECT_FALSE(marked_processes(mark_).empty()) << "no process of the job found before scancel";
  const auto t0 = std::chrono::steady_clock::now();
  const Result cancel = sh("scancel " + job_id);
  ASSERT_EQ(cancel.status, 0) << describe(cancel);
  const auto left = leftovers(30);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(left.empty()) << "left after scancel:\n" << join(left) << slurp(dir_ / "hang.out");
  std::printf("scancel to no process left: %.2f s\n", s);
}

TEST_F(SparkrunMultiNode, KilledNodeDaemonEndsTheJobWithNoProcessLeft) {
  // The ranks hang (rank 1 stops answering, ten-minute timeout); then sn2's node daemon, an
  // srun step, is SIGKILLed. The launcher must see its srun end and stop every node.
  const std::string cmd =
      "SPARKNET_ROCE_TIMEOUT_MS=600000 timeout -k 5 90 salloc -Q -p multi -N 2 -n 2 " + sparkrun() +
      SPARK_LIBSPARK_APP + " --stop-rank 1";
  const fs::path out = dir_ / "daemon.out", err = dir_ / "daemon.err";
  // In the background: the test kills the daemon meanwhile.
  // (sh() puts the command in single quotes: none in here.)
  const Result bg =
      job("(" + cmd + " >" + quote(out.string()) + " 2>" + quote(err.string()) + "; echo $? >" +
          quote((dir_ / "daemon.rc").string()) + ") >/dev/null 2>&1 &");
  ASSERT_EQ(bg.status, 0) << describe(bg);
  std::string daemon_pid;
  for (int i = 0; i < 300 && daemon_pid.empty(); ++i) {
    usleep(100 * 1000);
    if (lines_with(slurp(out), "collectives ok").size() < 2) continue;
    // The daemon itself: not its srun (whose command line holds the daemon's) and not its
    // orphan watcher (a forked copy of the daemon, so its parent is the daemon).
    std::map<std::string, std::string> daemons;  // pid -> parent pid
    for (const auto& p : marked_processes(mark_)) {
      const std::string pid = p.substr(0, p.find(' '));
      const std::string cmd = p.substr(p.find(' ') + 1);
      if (cmd.find(" --daemon ") == std::string::npos ||
          cmd.find(" --host sn2") == std::string::npos || cmd.find("srun ") == 0)
        continue;
      std::ifstream st("/proc/" + pid + "/stat");
      std::string stat((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
      std::istringstream rest(stat.substr(stat.rfind(')') + 1));
      std::string state, ppid;
      rest >> state >> ppid;
      daemons[pid] = ppid;
    }
    for (const auto& [pid, ppid] : daemons) {
      if (daemons.count(ppid) == 0) daemon_pid = pid;
    }
  }
  ASSERT_FALSE(daemon_pid.empty()) << "no node daemon on sn2 found:\n"
                                   << slurp(out) << slurp(err) << join(marked_processes(mark_));
  ASSERT_EQ(kill(std::stoi(daemon_pid), SIGKILL), 0);
  std::string rc;
  for (int i = 0; i < 300 && rc.empty(); ++i) {  // bounded: 30 s
    usleep(100 * 1000);
    rc = slurp(dir_ / "daemon.rc");
  }
  const std::string e = slurp(err);
  ASSERT_FALSE(rc.empty()) << "sparkrun did not end after its daemon was killed:\n" << e;
  EXPECT_EQ(rc, "1\n") << e;
  EXPECT_GE(lines_with(e, "sparkrun: host sn2: ").size(), 1u) << e;
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));
}

TEST_F(SparkrunMultiNode, RanksSeeTheJobAndBindInsideTheirNodesCpus) {
  // Every rank reads the allocation as the launcher did (not its daemon step's one-task view:
  // SLURM_NTASKS=1, SLURM_PROCID=0), and SLURMD_NODENAME of its own node. sn2's slurmd runs
  // on one cpu only (the fixture pins it): --bind-to core there must stay on that cpu.
  const Result r =
      job("salloc -Q -p multi -N 2 -n 4 " + sparkrun() + "--tag-output --bind-to core sh -c " +
          quote(std::string(SPARK_ALLOCATION_PROBE) + "; echo procid=${SLURM_PROCID-unset}"));
  if (r.status == 2 && r.err.find("not available in this build") != std::string::npos) {
    GTEST_SKIP() << "sparkrun has no --bind-to: " << r.err;
  }
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string tag = "[" + std::to_string(rank) + "] ";
    EXPECT_EQ(lines_with(r.out, tag + "nodes=sn1:2,sn2:2").size(), 1u) << describe(r);
    EXPECT_EQ(lines_with(r.out, tag + "ntasks=4").size(), 1u) << describe(r);
    EXPECT_EQ(lines_with(r.out, tag + "procid=unset").size(), 1u) << describe(r);
    EXPECT_EQ(lines_with(r.out, tag + "this_node=" + (rank < 2 ? "sn1" : "sn2")).size(), 1u)
        << describe(r);
    if (rank >= 2 && !last_cpu_.empty()) {
      EXPECT_EQ(lines_with(r.out, tag + "cpus=" + last_cpu_).size(), 1u) << describe(r);
    }
  }
}

// Direction 1 across nodes, for comparison: SLURM's own PMIx server on each node, no sparkrun.
TEST_F(SparkrunMultiNode, SrunPmixWithoutSparkrunAcrossTwoNodes) {
  const Result r = job(std::string("srun -p multi --mpi=pmix -N 2 -n 4 ") + SPARK_LIBSPARK_APP);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string node = rank < 2 ? "sn1" : "sn2";
    EXPECT_EQ(lines_with(r.out, "rank " + std::to_string(rank) +
                                    " of 4: collectives ok on host - " + "(slurmd " + node + ")")
                  .size(),
              1u)
        << describe(r);
  }
}

// --- sparkrun doctor inside a multi-node allocation --------------------------------------
// No host options: the doctor's probe runs on every rank of the allocation (node daemons
// through srun, as for a job). The namespaces have no RDMA: the host checks say so (FAIL),
// the lanes are tcp and the round trips tcp echos; the exit status is 2 (docs/doctor.md).

namespace {

std::size_t count_matching(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  std::size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += std::regex_search(line, re) ? 1 : 0;
  return n;
}

bool machine_has_rdma_devices() {
  std::error_code ec;
  return fs::exists("/sys/class/infiniband", ec) && !fs::is_empty("/sys/class/infiniband", ec);
}

}  // namespace

class DoctorMultiNode : public SparkrunMultiNode {
 protected:
  void SetUp() override {
    SparkrunMultiNode::SetUp();
    if (IsSkipped()) return;
    if (machine_has_rdma_devices())
      GTEST_SKIP() << "this machine has RDMA devices: the tcp-only table checked here differs";
  }
  // Skips when the doctor cannot run its probe (not built): exit 3.
  void skip_without_probe(const Result& r) {
    if (r.status == 3 && r.err.find("spark_doctor_probe") != std::string::npos)
      GTEST_SKIP() << "spark_doctor_probe is not built: " << r.err;
  }
};

TEST_F(DoctorMultiNode, NoHostOptionsProbeEveryRankOfTheAllocation) {
  // The command of docs/doctor.md, as is: no -n, no --host, no --control-net.
  const Result r = job("salloc -Q -p multi -N 2 -n 2 " + std::string(SPARK_SPARKRUN) + " doctor");
  skip_without_probe(r);
  if (IsSkipped()) return;
  EXPECT_EQ(r.status, 2) << "no RDMA here: FAIL rows, exit 2: " << describe(r);
  EXPECT_EQ(lines_with(r.out, "sparkrun doctor: 2 rank(s), 1 link(s)").size(), 1u) << describe(r);
  // Host checks once per node, by its rank, each saying plainly that there is no RDMA.
  EXPECT_EQ(count_matching(r.out, "^sn1 +0 +rdma devices .* FAIL .*no RDMA device found"), 1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn2 +1 +rdma devices .* FAIL .*no RDMA device found"), 1u)
      << describe(r);
  // Each rank's lanes: its own node's namespace address, tcp.
  EXPECT_EQ(count_matching(r.out,
                           "^sn1 +0 +lanes .*no RDMA lane: round trips run over tcp: eth0\\("
                           "10\\."),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out,
                           "^sn2 +1 +lanes .*no RDMA lane: round trips run over tcp: eth0\\("
                           "10\\."),
            1u)
      << describe(r);
  // The pair across the two nodes: one tcp round trip and one reach row, both ok.
  EXPECT_EQ(count_matching(r.out,
                           "^sn1 +0 +tcp round trip +tcp:eth0->eth0 +rank 1 \\(sn2\\) +ok "
                           "+[0-9.]+ [mu]?s +median of 16 round trips"),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out,
                           "^sn1 +0 +reach +tcp:eth0 +rank 1 \\(sn2\\) +ok .*direct on 1 "
                           "lane"),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn[12] +[0-9]+ +(tcp round trip|rdma write|reach) "), 2u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sparkrun doctor: [0-9]+ problem\\(s\\)"), 1u) << describe(r);
  EXPECT_EQ(lines_with(r.err, "sparkrun: host sn1: rank 0 (pid ").size(), 1u) << describe(r);
  EXPECT_LT(r.seconds, 60) << describe(r);
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));

  // --local inside the same kind of allocation: this host only, no job (no srun, no ranks).
  const Result l =
      job("salloc -Q -p multi -N 2 -n 2 " + std::string(SPARK_SPARKRUN) + " doctor --local");
  EXPECT_EQ(l.status, 2) << describe(l);
  EXPECT_EQ(lines_with(l.out, "rank(s)").size(), 0u) << describe(l);
  EXPECT_EQ(count_matching(l.out, "^rdma devices .*FAIL .*no RDMA device found"), 1u)
      << describe(l);
  EXPECT_EQ(lines_with(l.err, "srun").size(), 0u) << describe(l);
}

TEST_F(DoctorMultiNode, SilentRankOnTheOtherNodeIsNamedAndTheTableIsBounded) {
  // Four ranks, two per node; rank 3 (sn2) never answers a round trip. Every pair gets its
  // row: the three pairs with rank 3 FAIL naming it, the other three (two across the nodes)
  // ok; rank 3 is UNREACHABLE from everyone. Bounded by the 500 ms windows.
  const Result r =
      job("salloc -Q -p multi -N 2 -n 4 " + std::string(SPARK_SPARKRUN) +
          " doctor --iters 4 --probe-timeout-ms 500 -x SPARK_DOCTOR_TEST_SILENT_RANK=3");
  skip_without_probe(r);
  if (IsSkipped()) return;
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(lines_with(r.out, "sparkrun doctor: 4 rank(s), 6 link(s)").size(), 1u) << describe(r);
  // Host checks from the first rank of each node only.
  EXPECT_EQ(count_matching(r.out, "^sn1 +0 +rdma devices "), 1u) << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn2 +2 +rdma devices "), 1u) << describe(r);
  EXPECT_EQ(count_matching(r.out, " rdma devices "), 2u) << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn[12] +[0-3] +lanes .*round trips run over tcp"), 4u)
      << describe(r);
  const std::string ok = " +tcp:eth0->eth0 +rank ([0-9]) \\((sn[12])\\) +ok ";
  EXPECT_EQ(count_matching(r.out, "^sn1 +0 +tcp round trip +tcp:eth0->eth0 +rank 1 \\(sn1\\) +ok "),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn1 +0 +tcp round trip +tcp:eth0->eth0 +rank 2 \\(sn2\\) +ok "),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn1 +1 +tcp round trip +tcp:eth0->eth0 +rank 2 \\(sn2\\) +ok "),
            1u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "tcp round trip" + ok), 3u) << describe(r);
  EXPECT_EQ(count_matching(r.out,
                           "^sn[12] +[0-2] +tcp round trip +tcp:eth0->eth0 +rank 3 \\(sn2\\) "
                           "+FAIL .*no answer.*rank 3 \\(sn2\\)"),
            3u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, "^sn[12] +[0-2] +reach .*rank 3 \\(sn2\\) +FAIL .*UNREACHABLE"),
            3u)
      << describe(r);
  EXPECT_EQ(count_matching(r.out, " reach .* ok .*direct on 1 lane"), 3u) << describe(r);
  EXPECT_LT(r.seconds, 60) << describe(r);
  EXPECT_TRUE(leftovers(10).empty()) << join(leftovers(0));
  std::printf("salloc -N 2 -n 4 sparkrun doctor, silent rank 3: %.2f s\n", r.seconds);
}

// scancel of a salloc job whose sparkrun runs in salloc's shell (outside the nodes): sparkrun
// gets SIGTERM, stops every node (daemons and ranks) and exits 128+15, which salloc returns;
// nothing of the job is left on any node.
TEST_F(SparkrunMultiNode, ScancelOfSallocEndsSparkrunWith143AndNothingLeft) {
  const std::string name = "spark-scancel-" + std::to_string(getpid());
  const fs::path out = dir_ / "salloc.out", err = dir_ / "salloc.err", rc = dir_ / "salloc.rc";
  // Rank 1 (on sn2) stops answering and the others would wait ten minutes: only scancel ends
  // this job. In the background (sh() quotes in single quotes: none in here).
  const Result bg = job("(SPARKNET_ROCE_TIMEOUT_MS=600000 timeout -k 5 90 salloc -Q -J " + name +
                        " -p multi -N 2 -n 2 " + sparkrun() + SPARK_LIBSPARK_APP +
                        " --stop-rank 1 >" + quote(out.string()) + " 2>" + quote(err.string()) +
                        "; echo $? >" + quote(rc.string()) + ") >/dev/null 2>&1 &");
  ASSERT_EQ(bg.status, 0) << describe(bg);
  for (int i = 0; i < 300 && lines_with(slurp(out), "collectives ok").size() < 2; ++i)
    usleep(100 * 1000);  // bounded: 30 s
  ASSERT_EQ(lines_with(slurp(out), "collectives ok").size(), 2u) << "the job never ran:\n"
                                                                 << slurp(out) << slurp(err);
  const Result id = sh("squeue -h -o %i -n " + name);
  ASSERT_EQ(id.status, 0) << describe(id);
  ASSERT_FALSE(id.out.empty()) << describe(id);
  const auto t0 = std::chrono::steady_clock::now();
  const Result cancel = sh("scancel " + id.out.substr(0, id.out.find('\n')));
  ASSERT_EQ(cancel.status, 0) << describe(cancel);
  std::string status;
  for (int i = 0; i < 300 && status.empty(); ++i) {  // bounded: 30 s
    usleep(100 * 1000);
    status = slurp(rc);
  }
  const std::string e = slurp(err);
  ASSERT_FALSE(status.empty()) << "salloc did not end after scancel:\n" << e;
  // salloc SIGTERMs sparkrun (143, every run so far); should the cancelled daemon steps end
  // first under load, sparkrun ends the job for the lost daemon (1). Either names its cause.
  if (status == "1\n") {
    EXPECT_GE(lines_with(e, "lost the node daemon").size(), 1u) << e;
  } else {
    EXPECT_EQ(status, "143\n") << "sparkrun's status after SIGTERM (128+15):\n" << e;
    // The launcher's line, or a node daemon's ("sparkrun: host sn1: got signal 15 ...").
    EXPECT_GE(lines_with(e, "got signal 15 (SIGTERM").size(), 1u) << e;
  }
  const auto left = leftovers(30);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(left.empty()) << "left after scancel:\n" << join(left) << e;
  std::printf("scancel of salloc to no process left: %.2f s\n", s);
}
