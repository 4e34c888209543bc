// `sparkrun doctor`: its options and help; the checks are spark_doctor_probe's
// (libspark/tools/doctor_probe), run here alone or on every rank of a job (docs/doctor.md).
#include "doctor.hpp"

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "options.hpp"
#include "strict_parse.hpp"
#include "tool_program.hpp"
#include "usage_error.hpp"

namespace spark::launch {

namespace {

constexpr const char* kHelp =
    "usage: sparkrun doctor [DOCTOR-OPTIONS] [LAUNCH-OPTIONS]\n"
    "Read-only checks of an RDMA (RoCE) setup, as one table, exit 0 only when all is well.\n"
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
    "row per pair: the lanes that serve the peer, or the relay when none does.\n"
    "Table: HOST RANK CHECK LANE PEER RESULT LATENCY DETAIL.\n"
    "\n"
    "DOCTOR-OPTIONS:\n"
    "  --expect-mtu N         interface MTU the fabric should have (default 9000)\n"
    "  --probe-timeout-ms N   deadline of one round trip test (default 3000); a peer that\n"
    "                         does not answer in time is a FAIL row\n"
    "  --iters N              round trips per lane pair (default 16)\n"
    "  --local                this host only, even inside a SLURM allocation\n"
    "  --sysfs DIR            read sysfs from DIR (tests)\n"
    "Exit status: 0 all well; 1 a FAIL or WARN row (or a rank failed); 2 bad options (nothing\n"
    "started); 127 spark_doctor_probe not found. SPARK_DOCTOR_PROBE overrides its path; it is\n"
    "looked for in the build tree, then next to sparkrun (the same path on every host).\n"
    "Example: sparkrun doctor -n 2 --host spark1,spark2\n";

}  // namespace

int doctor_main(int argc, char** argv) {
  CLI::App app{"sparkrun doctor", "sparkrun doctor"};
  app.set_help_flag();  // kHelp is the help
  bool help = false, local = false;
  std::string sysfs = "/sys", mtu_text = "9000", timeout_text = "3000", iters_text = "16";
  app.add_flag("-h,--help", help);
  app.add_flag("--local", local);
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
    launch.finish();  // refuse bad launch options here, before anything starts
    given = launch.given();
    if (local && !given.empty()) {
      throw UsageError("--local checks this host only; it takes no launch options");
    }
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun doctor");
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
    return 127;
  }
  const bool host_only = given.empty() && (local || std::getenv("SLURM_JOB_ID") == nullptr);
  std::vector<std::string> args{"sparkrun"};
  args.insert(args.end(), given.begin(), given.end());
  args.insert(args.end(), {program, "--expect-mtu", std::to_string(expect_mtu), "--sysfs", sysfs,
                           "--probe-timeout-ms", timeout_text, "--iters", iters_text});
  if (host_only) {  // the probe alone: no sparkrun, no job
    args.erase(args.begin());
    args.push_back("--host-checks");
  }
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(host_only ? program.c_str() : "/proc/self/exe", cargs.data());
  std::fprintf(stderr, "sparkrun: error: cannot run %s: %s\n", cargs[0], std::strerror(errno));
  return 127;
}

}  // namespace spark::launch
