// `sparkrun doctor`: its options and help; the checks are spark_doctor_probe's
// (libspark/tools/doctor_probe), run here alone or on every rank of a job (docs/doctor.md).
#include "doctor.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "options.hpp"
#include "spark/protocol/doctor_exit.hpp"
#include "strict_parse.hpp"
#include "tool_program.hpp"
#include "usage_error.hpp"

namespace spark::launch {

namespace {

constexpr const char* kHelp =
    "usage: sparkrun doctor [DOCTOR-OPTIONS] [LAUNCH-OPTIONS]\n"
    "Read-only checks of an RDMA (RoCE) setup, as one table (or --json), exit 0 only when all\n"
    "is well.\n"
    "\n"
    "Without LAUNCH-OPTIONS (and outside a SLURM allocation): this host only - RDMA devices\n"
    "and link state, the RoCE v2 GID per device, interface MTU (9000 expected on a Spark; 1500\n"
    "is a warning), the locked-memory limit, PMIx / hwloc / rdma-core versions, and\n"
    "SPARK_IB_HCA / SPARK_LANES / SPARK_IB_GID_INDEX.\n"
    "\n"
    "With LAUNCH-OPTIONS (as for a job: -n, --host, --hostfile, --launch-agent, -x, ...; inside\n"
    "salloc/sbatch the allocation): runs spark_doctor_probe on every rank through sparkrun. The\n"
    "first rank of each host runs the host checks above; each rank lists its lanes; every pair\n"
    "of ranks does a timed round trip on every lane pair that shares a subnet - an RDMA WRITE\n"
    "ping-pong when both ranks have RDMA lanes, else a tcp echo (marked tcp); then one 'reach'\n"
    "row per pair: the lanes that serve the peer, or the relay when none does; and per cable\n"
    "(the first ranks of two hosts, a lane pair on one subnet) the MTU of both ends.\n"
    "Table: HOST RANK CHECK LANE PEER RESULT LATENCY DETAIL.\n"
    "\n"
    "--bandwidth (with LAUNCH-OPTIONS) also qualifies every cable at speed: a tcp stream each\n"
    "way for --seconds, the interfaces' byte counters read on both ends (the bytes must leave\n"
    "and arrive on the lane's own interfaces), the rate judged against the link's reported\n"
    "speed (or --link-gbps, or the fastest direction of the run): FAIL below --fail-below %,\n"
    "WARN below --warn-below %. A summary line per cable and direction comes first.\n"
    "\n"
    "DOCTOR-OPTIONS:\n"
    "  --expect-mtu N         interface MTU the fabric should have (default 9000)\n"
    "  --probe-timeout-ms N   deadline of one round trip test (default 3000); a peer that\n"
    "                         does not answer in time is a FAIL row\n"
    "  --iters N              round trips per lane pair (default 16)\n"
    "  --local                this host only, even inside a SLURM allocation\n"
    "  --sysfs DIR            read sysfs from DIR (tests)\n"
    "  --json                 one JSON document on stdout instead of the table (schema:\n"
    "                         share/sparkrun/doctor-report.schema.json), every mode\n"
    "  --bandwidth            qualify every cable at speed (above; needs LAUNCH-OPTIONS)\n"
    "  --seconds N            length of each stream (default 2); a cable takes at most\n"
    "                         2 x (N + 1) s\n"
    "  --link-gbps G          judge rates against G Gb/s instead of the reported link speed\n"
    "  --relative             judge rates against the fastest direction of the run (links\n"
    "                         whose reported speed means nothing: VMs, emulation)\n"
    "  --warn-below P         WARN below P % of that rate (default 80)\n"
    "  --fail-below P         FAIL below P % of that rate (default 50)\n"
    "Exit status: 0 all well; 1 warnings (WARN rows, no FAIL row); 2 failures (a FAIL row, or a\n"
    "rank failed); 3 could not run (bad options, spark_doctor_probe not found, the job did not\n"
    "start). SPARK_DOCTOR_PROBE overrides the probe's path; it is looked for in the build tree,\n"
    "then next to sparkrun (the same path on every host).\n"
    "Examples: sparkrun doctor -n 2 --host spark1,spark2\n"
    "          sparkrun doctor --bandwidth --json -n 2 --host spark1,spark2\n";

// Runs `args` (argv[0] the program path) and waits; SIGINT/SIGTERM/SIGHUP sent to doctor go to
// it too. Its exit status, 128 + the signal that killed it, or -1 when it could not start.
pid_t child_pid = -1;

void forward_signal(int sig) {
  if (child_pid > 0) ::kill(child_pid, sig);
}

int run_and_wait(const std::string& path, std::vector<std::string> args) {
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::fflush(nullptr);
  child_pid = ::fork();
  if (child_pid < 0) {
    std::fprintf(stderr, "sparkrun: error: cannot fork: %s\n", std::strerror(errno));
    return -1;
  }
  if (child_pid == 0) {
    ::execv(path.c_str(), cargs.data());
    std::fprintf(stderr, "sparkrun: error: cannot run %s: %s\n", path.c_str(),
                 std::strerror(errno));
    ::_exit(127);
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  int status = 0;
  while (::waitpid(child_pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int doctor_main(int argc, char** argv) {
  CLI::App app{"sparkrun doctor", "sparkrun doctor"};
  app.set_help_flag();  // kHelp is the help
  bool help = false, local = false;
  bool json = false, bandwidth = false, relative = false;
  std::string sysfs = "/sys", mtu_text = "9000", timeout_text = "3000", iters_text = "16";
  std::string seconds_text = "2", link_text, warn_text = "80", fail_text = "50";
  app.add_flag("-h,--help", help);
  app.add_flag("--local", local);
  app.add_flag("--json", json);
  app.add_flag("--bandwidth", bandwidth);
  app.add_flag("--relative", relative);
  app.add_option("--seconds", seconds_text);
  app.add_option("--link-gbps", link_text);
  app.add_option("--warn-below", warn_text);
  app.add_option("--fail-below", fail_text);
  app.add_option("--expect-mtu", mtu_text);
  app.add_option("--probe-timeout-ms", timeout_text);
  app.add_option("--iters", iters_text);
  app.add_option("--sysfs", sysfs);
  LaunchOptions launch(app);
  int expect_mtu = 0;
  std::vector<std::string> given;
  try {
    if (parse_command_line(app, std::vector<std::string>(argv + 1, argv + argc))) {
      throw UsageError("'--': give launch options only, no program");
    }
    if (help) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    expect_mtu = parse_int(mtu_text, 256, 65536, "--expect-mtu");
    parse_int(timeout_text, 10, 600000, "--probe-timeout-ms");
    parse_int(iters_text, 1, 100000, "--iters");
    parse_int(seconds_text, 1, 600, "--seconds");
    if (!link_text.empty()) parse_number(link_text, 0.001, 100000, "--link-gbps");
    const double warn = parse_number(warn_text, 0, 100, "--warn-below");
    if (parse_number(fail_text, 0, 100, "--fail-below") > warn)
      throw UsageError("--fail-below " + fail_text + " is above --warn-below " + warn_text +
                       ": a rate must WARN before it FAILs");
    launch.finish();  // refuse bad launch options here, before anything starts
    given = launch.given();
    if (local && !given.empty()) {
      throw UsageError("--local checks this host only; it takes no launch options");
    }
    if (bandwidth && (local || (given.empty() && std::getenv("SLURM_JOB_ID") == nullptr))) {
      throw UsageError(
          "--bandwidth qualifies the cables between the hosts of a job: give launch options "
          "(e.g. -n 2 --host spark1,spark2) or run it inside a SLURM allocation");
    }
  } catch (const UsageError& e) {
    report_usage_error(e.what(), "sparkrun doctor");
    return protocol::doctor_exit::could_not_run;
  }
  // The probe does the checks (it links libspark's verbs layer, the launcher does not): on
  // every rank of a job that sparkrun starts, or alone here (--host-checks).
  const std::string program =
      tool_program("SPARK_DOCTOR_PROBE", SPARK_DOCTOR_PROBE_PATH, "spark_doctor_probe");
  if (::access(program.c_str(), X_OK) != 0) {
    std::fprintf(stderr,
                 "sparkrun: error: probe program %s not found; build target spark_doctor_probe "
                 "or set SPARK_DOCTOR_PROBE\n",
                 program.c_str());
    return protocol::doctor_exit::could_not_run;
  }
  const bool host_only = given.empty() && (local || std::getenv("SLURM_JOB_ID") == nullptr);
  std::vector<std::string> args{"sparkrun"};
  args.insert(args.end(), given.begin(), given.end());
  args.insert(args.end(), {program, "--expect-mtu", std::to_string(expect_mtu), "--sysfs", sysfs,
                           "--probe-timeout-ms", timeout_text, "--iters", iters_text, "--seconds",
                           seconds_text, "--warn-below", warn_text, "--fail-below", fail_text});
  if (!link_text.empty()) args.insert(args.end(), {"--link-gbps", link_text});
  if (json) args.push_back("--json");
  if (bandwidth) args.push_back("--bandwidth");
  if (relative) args.push_back("--relative");
  if (host_only) {  // the probe alone: no sparkrun, no job
    args.erase(args.begin());
    args.push_back("--host-checks");
  }
  // The verdict comes back as the probe's status (through sparkrun's for a job); anything else
  // means the checks did not run to their end.
  const int status = run_and_wait(host_only ? program : "/proc/self/exe", args);
  const int code = protocol::doctor_exit::from_probe(status);
  if (code == protocol::doctor_exit::could_not_run)
    std::fprintf(stderr, "sparkrun doctor: could not run the checks (%s exited with %d); exit 3\n",
                 host_only ? "spark_doctor_probe" : "sparkrun", status);
  return code;
}

}  // namespace spark::launch
