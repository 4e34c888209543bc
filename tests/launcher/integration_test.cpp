// Integration tests: run the real sparkrun on real programs (tests/launcher/progs) and check
// output, exit codes, and that no process of a job survives.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Result {
  int code = -1;  // exit code, or 128+signal
  std::string out, err;
  double seconds = 0;
};

// A child process with its stdout/stderr captured.
struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
};

Child spawn(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  int o[2], e[2], i[2];
  EXPECT_EQ(pipe2(o, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(e, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(i, O_CLOEXEC), 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(i[0], 0);
    dup2(o[1], 1);
    dup2(e[1], 2);
    execv(argv[0], argv.data());
    _exit(126);
  }
  close(o[1]);
  close(e[1]);
  close(i[0]);
  if (!stdin_text.empty()) {
    ssize_t n = write(i[1], stdin_text.data(), stdin_text.size());
    (void)n;
  }
  close(i[1]);
  return {pid, o[0], e[0]};
}

// Reads until both pipes close, then reaps; kills the child after `limit`.
Result finish(Child c, std::chrono::seconds limit = 60s,
              const std::function<void(const std::string&)>& on_out = {}) {
  Result r;
  auto t0 = Clock::now();
  bool killed = false;
  int fds[2] = {c.out, c.err};
  std::string* bufs[2] = {&r.out, &r.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int k = 0; k < 2; ++k) {
      if (fds[k] >= 0) {
        p[n] = {fds[k], POLLIN, 0};
        which[n++] = k;
      }
    }
    int rc = poll(p, n, 200);
    if (!killed && Clock::now() - t0 > limit) {
      kill(c.pid, SIGKILL);
      killed = true;
      ADD_FAILURE() << "sparkrun did not finish within " << limit.count() << " s";
    }
    if (rc <= 0) continue;
    for (nfds_t k = 0; k < n; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = read(fds[which[k]], buf, sizeof buf);
      if (got > 0) {
        bufs[which[k]]->append(buf, static_cast<size_t>(got));
        if (which[k] == 0 && on_out) on_out(r.out);
      } else {
        close(fds[which[k]]);
        fds[which[k]] = -1;
      }
    }
  }
  int status = 0;
  waitpid(c.pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

Result sparkrun(std::vector<std::string> args, std::chrono::seconds limit = 60s,
                const std::string& stdin_text = "") {
  args.insert(args.begin(), SPARKRUN);
  return finish(spawn(args, stdin_text), limit);
}

std::string marker() {
  std::random_device rd;
  return "sparkrun-test-marker-" + std::to_string(getpid()) + "-" + std::to_string(rd());
}

// Processes whose command line contains `m` (the job-unique marker), except this test.
std::vector<pid_t> processes_with(const std::string& m) {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  if (!d) return found;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // Zombies have an empty cmdline; they are dead already.
    if (cmd.find(m) != std::string::npos) found.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return found;
}

// Waits (bounded) until no process carries the marker; returns the survivors.
std::vector<pid_t> survivors(const std::string& m, std::chrono::seconds within = 10s) {
  auto deadline = Clock::now() + within;
  std::vector<pid_t> left;
  do {
    left = processes_with(m);
    if (left.empty()) return left;
    std::this_thread::sleep_for(50ms);
  } while (Clock::now() < deadline);
  for (pid_t p : left) kill(p, SIGKILL);  // do not leak them into other tests
  return left;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(LauncherJob, HelloThreeRanks) {
  Result r = sparkrun({"-n", "3", "--tag-output", PMIX_CLIENT, "hello"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 3u) << r.out;
  std::string job;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string tag = "[" + std::to_string(rank) + "] hello ";
    bool seen = false;
    for (const auto& l : ls) {
      if (l.rfind(tag, 0) != 0) continue;
      seen = true;
      const std::string rs = std::to_string(rank);
      EXPECT_TRUE(contains(l, " rank=" + rs + " size=3 local_rank=" + rs + " local_size=3 ")) << l;
      EXPECT_TRUE(contains(l, "univ=3 appnum=0 spark_rank=" + rs +
                                  " spark_size=3 "
                                  "spark_local_rank=" +
                                  rs +
                                  " spark_local_size=3 "
                                  "spark_node_rank=0 "))
          << l;
      // PMIx's hostname and SPARK_HOST agree.
      auto host = l.substr(l.find(" host=") + 6);
      host = host.substr(0, host.find(' '));
      EXPECT_TRUE(contains(l, "spark_host=" + host + " ")) << l;
      auto j = l.substr(l.find(" job=") + 5);
      if (job.empty()) job = j;
      EXPECT_EQ(j, job) << "ranks see different job ids";
    }
    EXPECT_TRUE(seen) << "no line from rank " << rank << ":\n" << r.out;
  }
  EXPECT_FALSE(job.empty() || job == "-");
}

TEST(LauncherJob, PmixPutFenceGetAcrossRanks) {
  Result r = sparkrun({"-n", "3", PMIX_CLIENT, "modex"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.out, "modex rank=" + std::to_string(rank) + " ok=3/3")) << r.out;
  }
}

TEST(LauncherJob, RankExit3StopsTheJob) {
  const std::string m = marker();
  Result r = sparkrun({"-n", "3", "--kill-grace", "1", PMIX_CLIENT, "exit", "3", "1", m});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "sparkrun: rank 1 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "exited with status 3")) << r.err;
  EXPECT_LT(r.seconds, 30) << "the other ranks sleep 60 s: the group abort did not happen";
  EXPECT_TRUE(survivors(m).empty());
}

TEST(LauncherJob, RankKilledBySignal) {
  const std::string m = marker();
  Result r = sparkrun({"-n", "3", PMIX_CLIENT, "kill9", "2", m});
  EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 2 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "killed by signal 9")) << r.err;
  EXPECT_TRUE(survivors(m).empty());
}

TEST(LauncherJob, PmixAbortPrintsTheMessage) {
  const std::string m = marker();
  Result r = sparkrun({"-n", "3", PMIX_CLIENT, "abort", "5", "disk on fire", "1", m});
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_TRUE(contains(r.err, "sparkrun: rank 1 aborted: disk on fire\n")) << r.err;
  EXPECT_TRUE(survivors(m).empty());
  Result zero = sparkrun({"-n", "2", PMIX_CLIENT, "abort", "0", "status zero", "0", m});
  EXPECT_EQ(zero.code, 1) << zero.err;
}

// Regression: an abort while the other ranks wait in a fence left PMIx_server_finalize
// waiting forever about 1 run in 3 (the abort's completion came from the wrong thread).
// Every run must end, with the abort's status, well within the bound.
TEST(LauncherJob, AbortDuringFenceNeverHangs) {
  const std::string m = marker();
  for (int i = 0; i < 20; ++i) {
    Result r = sparkrun({"-n", "3", PMIX_CLIENT, "abort-in-fence", "3", "2", m}, 20s);
    ASSERT_EQ(r.code, 3) << "run " << i << ": " << r.err;
    EXPECT_LT(r.seconds, 15.0) << "run " << i;
    EXPECT_TRUE(contains(r.err, "rank 2 aborted: abort while the others wait in a fence")) << r.err;
  }
  EXPECT_TRUE(survivors(m).empty());
}

// Processes (zombies included) whose parent is this process, other than `except`.
std::vector<pid_t> children_of_this_test() {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  if (!d) return found;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(close_paren + 2));
    char state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid()) found.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return found;
}

// sparkrun's helpers (the orphan watcher) must be reaped by sparkrun: a zombie left to
// PID 1 stays forever in a container. This test makes itself the subreaper, so anything
// sparkrun leaves behind becomes its child and is seen here, zombie or not.
TEST(LauncherJob, NoHelperOutlivesSparkrun) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
  const std::string m = marker();
  Result ok = sparkrun({"-n", "2", PMIX_CLIENT, "hello", m});
  EXPECT_EQ(ok.code, 0) << ok.err;
  Result failed = sparkrun({"-n", "3", PMIX_CLIENT, "exit", "3", "1", m});
  EXPECT_EQ(failed.code, 3) << failed.err;
  Result aborted = sparkrun({"-n", "3", PMIX_CLIENT, "abort-in-fence", "4", "0", m});
  EXPECT_EQ(aborted.code, 4) << aborted.err;
  // Rank processes are killed and reaped by sparkrun; give stragglers a moment to appear.
  std::this_thread::sleep_for(300ms);
  std::vector<pid_t> left = children_of_this_test();
  for (pid_t p : left) {
    kill(p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) outlived sparkrun";
}

TEST(LauncherJob, MissingProgram) {
  Result r = sparkrun({"-n", "2", "/nonexistent/dir/prog"});
  EXPECT_EQ(r.code, 127);
  EXPECT_TRUE(contains(r.err, "cannot start rank ")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/dir/prog: No such file or directory")) << r.err;
  Result p = sparkrun({"-n", "2", "no-such-program-in-path-xyz"});
  EXPECT_EQ(p.code, 127);
  EXPECT_TRUE(contains(p.err, "no-such-program-in-path-xyz")) << p.err;
}

TEST(LauncherJob, NonExecutableProgram) {
  const std::string path = ::testing::TempDir() + "/sparkrun_not_executable.sh";
  {
    std::ofstream f(path);
    f << "#!/bin/sh\necho should not run\n";
  }
  chmod(path.c_str(), 0644);
  Result r = sparkrun({"-n", "2", path});
  EXPECT_EQ(r.code, 127);
  EXPECT_TRUE(contains(r.err, path + ": Permission denied")) << r.err;
  EXPECT_FALSE(contains(r.out, "should not run"));
  unlink(path.c_str());
}

TEST(LauncherJob, TimeoutExits124) {
  const std::string m = marker();
  Result r = sparkrun({"-n", "3", "--timeout", "1", PMIX_CLIENT, "sleep", "60", m});
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_TRUE(contains(r.err, "--timeout 1 s")) << r.err;
  EXPECT_LT(r.seconds, 30);
  EXPECT_TRUE(survivors(m).empty());
}

int entries_in(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d))
      n += std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0;
    closedir(d);
  }
  return n;
}

// SIGKILL to sparkrun: the ranks die with it (PDEATHSIG) and so do the ranks' own children
// (the orphan watcher kills the process groups), and the job's temp dir goes too.
TEST(LauncherJob, SigkillToSparkrunLeavesNoProcess) {
  const std::string m = marker();
  char tmpl[] = "/tmp/spark-sigkill-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string tmpdir = tmpl;
  ::setenv("TMPDIR", tmpdir.c_str(), 1);  // sparkrun makes its job dir here
  Child c = spawn({SPARKRUN, "-n", "3", PMIX_CLIENT, "spawn-sleep", "60", m});
  ::unsetenv("TMPDIR");
  pid_t sparkrun_pid = c.pid;
  bool sent = false;
  Result r = finish(c, 60s, [&](const std::string& out) {
    int started = 0;
    for (const auto& l : lines(out)) started += contains(l, "sleeping with child");
    if (started == 3 && !sent) {
      sent = true;
      // Every rank and every rank's child carry the marker now.
      EXPECT_GE(processes_with(m).size(), 6u);
      EXPECT_EQ(entries_in(tmpdir), 1) << "no job dir in TMPDIR while the job runs";
      kill(sparkrun_pid, SIGKILL);
    }
  });
  ASSERT_TRUE(sent) << "ranks did not start: " << r.err;
  EXPECT_EQ(r.code, 128 + SIGKILL);
  EXPECT_TRUE(survivors(m).empty());
  // The watcher removes the job dir after its kills; give it a moment on a loaded machine.
  for (int i = 0; i < 100 && entries_in(tmpdir) > 0; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(entries_in(tmpdir), 0) << "the job dir outlived sparkrun in " << tmpdir;
  std::filesystem::remove_all(tmpdir);
}

TEST(LauncherJob, SigtermToSparkrunStopsTheJob) {
  const std::string m = marker();
  Child c = spawn({SPARKRUN, "-n", "2", "--kill-grace", "1", PMIX_CLIENT, "sleep", "60", m});
  pid_t pid = c.pid;
  bool sent = false;
  Result r = finish(c, 60s, [&](const std::string& out) {
    if (lines(out).size() == 2 && !sent) {
      sent = true;
      kill(pid, SIGTERM);
    }
  });
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_TRUE(contains(r.err, "stopping every rank")) << r.err;
  EXPECT_TRUE(survivors(m).empty());
}

TEST(LauncherJob, OutputLinesOfRanksNeverMix) {
  // Each line is written in three pieces; with --tag-output every line must come out whole.
  const char* script =
      "i=0; while [ $i -lt 200 ]; do printf 'rank%s-' $SPARK_RANK; printf 'part-'; "
      "printf 'end\\n'; i=$((i+1)); done";
  Result r = sparkrun({"-n", "3", "--tag-output", "/bin/sh", "-c", script});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ls = lines(r.out);
  EXPECT_EQ(ls.size(), 600u);
  for (const auto& l : ls) {
    ASSERT_EQ(l.size(), 18u) << "mixed line: " << l;
    char rank = l[1];
    EXPECT_EQ(l, std::string("[") + rank + "] rank" + rank + "-part-end") << l;
  }
}

TEST(LauncherJob, Sigusr1IsForwardedToEveryRank) {
  const char* script =
      "trap 'echo got-usr1; exit 0' USR1; echo ready; i=0; "
      "while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo no-signal; exit 1";
  Child c = spawn({SPARKRUN, "-n", "2", "--tag-output", "/bin/sh", "-c", script});
  pid_t pid = c.pid;
  bool sent = false;
  Result r = finish(c, 60s, [&](const std::string& out) {
    if (!sent && lines(out).size() == 2) {
      sent = true;
      kill(pid, SIGUSR1);
    }
  });
  ASSERT_TRUE(sent) << r.err;
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[0] got-usr1")) << r.out;
  EXPECT_TRUE(contains(r.out, "[1] got-usr1")) << r.out;
}

TEST(LauncherJob, TimestampOutput) {
  Result r = sparkrun({"-n", "1", "--timestamp-output", "--tag-output", "/bin/echo", "hi"});
  ASSERT_EQ(r.code, 0) << r.err;
  // 2026-11-30T06:07:05.123Z [0] hi
  ASSERT_EQ(r.out.size(), 32u) << r.out;
  EXPECT_EQ(r.out[4], '-');
  EXPECT_EQ(r.out[10], 'T');
  EXPECT_EQ(r.out.substr(23), "Z [0] hi\n");
}

TEST(LauncherJob, StdinGoesToRankZeroOnly) {
  Result r = sparkrun({"-n", "2", "--tag-output", "/bin/cat"}, 60s, "from stdin\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] from stdin\n");
}

TEST(LauncherJob, OutputDirAndExports) {
  const std::string dir = ::testing::TempDir() + "/sparkrun_out_" + std::to_string(getpid());
  Result r = sparkrun({"-n", "2", "--output-dir", dir, "-x", "SPARK_TEST_VAR=v1", "/bin/sh", "-c",
                       "echo out-$SPARK_RANK-$SPARK_TEST_VAR; echo err-$SPARK_RANK >&2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream o(dir + "/rank." + std::to_string(rank) + "/stdout");
    std::ifstream e(dir + "/rank." + std::to_string(rank) + "/stderr");
    std::string ol, el;
    std::getline(o, ol);
    std::getline(e, el);
    EXPECT_EQ(ol, "out-" + std::to_string(rank) + "-v1");
    EXPECT_EQ(el, "err-" + std::to_string(rank));
  }
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
}

TEST(LauncherJob, OversubscribeAllowsMoreRanksThanSlots) {
  // Both ranks start, on the one host of one slot, with their identity; without the flag the
  // same job is refused (BadInputStartsNothing checks that nothing starts then).
  const std::vector<std::string> job = {"--host",
                                        "localhost:1",
                                        "-n",
                                        "2",
                                        "--tag-output",
                                        "/bin/sh",
                                        "-c",
                                        "echo rank $SPARK_RANK of $SPARK_SIZE on $SPARK_HOST local "
                                        "$SPARK_LOCAL_RANK/$SPARK_LOCAL_SIZE"};
  std::vector<std::string> over = job;
  over.insert(over.begin(), "--oversubscribe");
  Result r = sparkrun(over);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "[0] rank 0 of 2 on localhost local 0/2\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "[1] rank 1 of 2 on localhost local 1/2\n")) << r.out;
  Result refused = sparkrun(job);
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_TRUE(contains(refused.err, "--oversubscribe")) << refused.err;
}

// Bad input: exit 2, a clear error, and nothing started (the program would create a file).
TEST(LauncherJob, BadInputStartsNothing) {
  const std::string flag = ::testing::TempDir() + "/sparkrun_started_" + std::to_string(getpid());
  const std::vector<std::string> prog = {"/bin/sh", "-c", "touch " + flag};
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"-n", "0"}, "-n: 0 is out of range"},
      {{"-n", "abc"}, "-n: 'abc' is not a whole number"},
      {{"--no-such-option"}, "--no-such-option"},
      {{"--hostfile", "/nonexistent/hostfile"}, "--hostfile /nonexistent/hostfile: cannot open"},
      {{"--host", "localhost:2", "-n", "3"}, "--oversubscribe"},
      {{"-x", "SPARK_TEST_UNSET_VARIABLE"}, "SPARK_TEST_UNSET_VARIABLE is not set"},
      {{"--timeout", "soon"}, "--timeout"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.end(), prog.begin(), prog.end());
    Result r = sparkrun(args);
    EXPECT_EQ(r.code, 2) << ::testing::PrintToString(c.args) << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, "sparkrun: error: ")) << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << r.err;
    struct stat st;
    EXPECT_NE(stat(flag.c_str(), &st), 0)
        << "a rank was started for " << ::testing::PrintToString(c.args);
    unlink(flag.c_str());
  }
}

TEST(LauncherJob, HelpAndVersion) {
  Result h = sparkrun({"--help"});
  EXPECT_EQ(h.code, 0);
  for (const char* opt :
       {"-n", "--host", "--hostfile", "-x", "--tag-output", "--timestamp-output", "--output-dir",
        "--timeout", "--kill-grace", "--oversubscribe", "--print-config"}) {
    EXPECT_TRUE(contains(h.out, opt)) << opt;
  }
  Result v = sparkrun({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("sparkrun ", 0), 0u) << v.out;
}

TEST(LauncherJob, PrintConfig) {
  if (!SPARK_CONFIG_BUILT) GTEST_SKIP() << "built without libspark's spark_config";
  Result d = sparkrun({"--print-config"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_TRUE(contains(d.out, "SPARKNET_ROCE_TIMEOUT_MS=10000")) << d.out;
  EXPECT_TRUE(contains(d.out, "default")) << d.out;
  Result e =
      finish(spawn({"/usr/bin/env", "SPARKNET_ROCE_TIMEOUT_MS=5000", SPARKRUN, "--print-config"}));
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_TRUE(contains(e.out, "SPARKNET_ROCE_TIMEOUT_MS=5000")) << e.out;
  Result bad =
      finish(spawn({"/usr/bin/env", "SPARKNET_ROCE_TIMEOUT_MS=abc", SPARKRUN, "--print-config"}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "SPARKNET_ROCE_TIMEOUT_MS")) << bad.err;
}

// --print-config shows what the ranks would read: -x wins over the environment and is named as
// the source; a name the table does not know is a warning on stderr, not a table line.
TEST(LauncherJob, PrintConfigAppliesExportsAndWarnsOnStderr) {
  if (!SPARK_CONFIG_BUILT) GTEST_SKIP() << "built without libspark's spark_config";
  Result r = finish(spawn({"/usr/bin/env", "SPARKNET_ROCE_TIMEOUT_MS=5000", "SPARK_TRASNPORT=tcp",
                           "SPARK_DOCTOR_PROBE=/opt/probe", SPARKRUN, "--print-config", "-x",
                           "SPARKNET_ROCE_TIMEOUT_MS=4321", "-x", "SPARK_TCP_LANES=3"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "SPARKNET_ROCE_TIMEOUT_MS=4321 [-x]\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "SPARK_TCP_LANES=3 [-x]\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "SPARK_DOCTOR_PROBE=/opt/probe [environment]\n")) << r.out;
  EXPECT_FALSE(contains(r.out, "TRASNPORT")) << r.out;
  EXPECT_TRUE(contains(r.err,
                       "sparkrun: warning: SPARK_TRASNPORT is not a sparkrun setting (did you "
                       "mean SPARK_TRANSPORT?)\n"))
      << r.err;
  EXPECT_FALSE(contains(r.err, "SPARK_DOCTOR_PROBE")) << r.err;
  // A bad -x value is refused as it would be for a launch.
  Result bad = sparkrun({"--print-config", "-x", "SPARK_TCP_LANES=99"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "sparkrun: error: SPARK_TCP_LANES=\"99\" is refused")) << bad.err;
}

// A SPARK_* / SPARKNET_* name the knob table does not know, in sparkrun's environment or given
// with -x, gets one warning line before the job starts, naming the nearest known name; the job
// runs (with the defaults). Documented names (tool paths, test hooks) and Apache Spark's do not.
TEST(LauncherJob, UnknownSettingNamesAreWarnedAbout) {
  if (!SPARK_CONFIG_BUILT) GTEST_SKIP() << "built without libspark's spark_config";
  Result r = finish(
      spawn({"/usr/bin/env", "SPARK_TRASNPORT=tcp", "SPARK_DOCTOR_PROBE=/opt/probe",
             "SPARK_HOME=/opt/spark", SPARKRUN, "-n", "2", "-x", "SPARKNET_ROCE_TIMEOUT=2000", "-x",
             "SPARK_TEST_ROCE=1", "/bin/sh", "-c", "echo ran-$SPARK_RANK"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ran-0\n") && contains(r.out, "ran-1\n")) << r.out;
  EXPECT_TRUE(contains(r.err,
                       "sparkrun: warning: SPARK_TRASNPORT is not a sparkrun setting (did you "
                       "mean SPARK_TRANSPORT?)\n"))
      << r.err;
  EXPECT_TRUE(contains(r.err,
                       "sparkrun: warning: SPARKNET_ROCE_TIMEOUT is not a sparkrun setting (did "
                       "you mean SPARKNET_ROCE_TIMEOUT_MS?)\n"))
      << r.err;
  for (const char* known : {"SPARK_DOCTOR_PROBE", "SPARK_TEST_ROCE", "SPARK_HOME"})
    EXPECT_FALSE(contains(r.err, known)) << r.err;
}

TEST(LauncherJob, OpenMpiDirectLaunch) {
  const std::string prog = MPI_ALLREDUCE;
  if (prog.empty()) GTEST_SKIP() << "mpicc.openmpi not found: Open MPI direct launch not tested";
  Result r = sparkrun({"-n", "3", "--timeout", "120", prog}, 150s);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(contains(r.out, "mpi rank=" + std::to_string(rank) + " size=3 sum=6 ok")) << r.out;
  }
}

}  // namespace
