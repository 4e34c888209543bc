// Multi-process test harness (the Gloo multiproc pattern): fork one process per rank, wire
// them up through the real environment rendezvous (SPARK_RANK/SPARK_SIZE/SPARK_RENDEZVOUS),
// run a body, and collect exit codes. Bodies report problems on stderr and return non-zero.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../lib/free_port.hpp"
#include "bootstrap/bootstrap.hpp"
#include "comm/communicator_impl.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace spark::test {

/// Transports to test: tcp and shm here; "roce" too when SPARK_TEST_ROCE is set (inside the
/// Soft-RoCE VM of tests/rdma, where an RDMA device exists).
inline std::vector<std::string> test_transports() {
  std::vector<std::string> t = {"tcp", "shm"};
  if (std::getenv("SPARK_TEST_ROCE") != nullptr) t.emplace_back("roce");
  return t;
}

/// Set by the Soft-RoCE VM script (tests/rdma/vm_libspark.sh, SPARK_TEST_EMULATED) and, for
/// the aarch64 cross-build whose tests run under qemu-user, by tests/libspark/CMakeLists.txt:
/// the ranks run under TCG emulation on a shared 2-core host (next to other tests at ctest
/// -j2). In the VM a vCPU loses the host CPU for tens of ms at a time and the guest counts that
/// stolen time as the process's own CPU time; under qemu-user every step is ~10-30x slower. So
/// the bounds on lateness and CPU use that hold on real hardware get the wider values the
/// tests name for emulation.
inline bool emulated() {
  return std::getenv("SPARK_TEST_EMULATED") != nullptr;
}

/// The exit code of a rank body that cannot test what it was written for here; the gtest
/// body then skips with its reason (ctest: SKIPPED). Every rank must agree (every_rank).
constexpr int kRankSkip = 77;
inline bool any_rank_skipped(const std::vector<int>& codes) {
  return std::find(codes.begin(), codes.end(), kRankSkip) != codes.end();
}
/// True on every rank when `mine` is true on every rank of `comm` (collective).
inline bool every_rank(CommunicatorImpl& comm, bool mine) {
  std::int32_t v = mine ? 1 : 0;
  comm.allreduce(&v, &v, 1, DType::i32, ReduceOp::min);
  return v != 0;
}
/// Why a single-copy test skips: ranks that do not reach each other's memory.
inline constexpr const char* kNoCrossMemory =
    "no cross-memory attach between the ranks here (qemu-user, whose addresses are not the "
    "host's; Yama's ptrace_scope or seccomp refusing process_vm_readv between sibling processes)";

struct RankSpec {
  int size = 2;
  std::string transport = "tcp";  ///< SPARK_TRANSPORT
  std::uint32_t timeout_ms = 10000;
  int tcp_lanes = 2;
  std::map<std::string, std::string> extra_env;  ///< more knobs for Config::from_map
  std::function<void(int rank, std::map<std::string, std::string>&)> per_rank_env;
  /// Exit right after the body, without destroying the communicator: rank 0 hosts the
  /// rendezvous store and lingers (up to the join timeout) for ranks that never leave, e.g. a
  /// stopped one. Under sparkrun the launcher kills such a job instead.
  bool quick_exit = false;
  /// Ranks that stop themselves (SIGSTOP): killed as soon as every other rank has exited.
  std::vector<int> stopped_ranks;
};

/// Builds a communicator for `rank` the way spark::init() does, but from a map (no setenv) and
/// with failure reporting off (no launcher to report to).
inline std::unique_ptr<CommunicatorImpl> make_comm(const RankSpec& spec, int rank, int port) {
  std::map<std::string, std::string> env = spec.extra_env;
  env["SPARK_RANK"] = std::to_string(rank);
  env["SPARK_SIZE"] = std::to_string(spec.size);
  env["SPARK_RENDEZVOUS"] = "127.0.0.1:" + std::to_string(port);
  env["SPARK_TRANSPORT"] = spec.transport;
  env["SPARK_TCP_LANES"] = std::to_string(spec.tcp_lanes);
  env["SPARKNET_ROCE_TIMEOUT_MS"] = std::to_string(spec.timeout_ms);
  if (!env.count("SPARK_JOIN_TIMEOUT_MS")) env["SPARK_JOIN_TIMEOUT_MS"] = "30000";
  if (spec.per_rank_env) spec.per_rank_env(rank, env);
  auto config = config::Config::from_map(env);
  auto boot = bootstrap::make_env_bootstrap(config);
  CommOptions opt = CommOptions::from_config(config);
  opt.report_failures = false;
  return std::make_unique<CommunicatorImpl>(std::move(boot), opt);
}

/// Runs body(comm, rank) in spec.size forked processes. Returns each rank's exit code
/// (128 + signal when killed). Ranks still running after `limit` are killed (SIGKILL).
inline std::vector<int> run_ranks(const RankSpec& spec,
                                  const std::function<int(CommunicatorImpl&, int)>& body,
                                  std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  const int port = free_port();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < spec.size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        auto comm = make_comm(spec, r, port);
        code = body(*comm, r);
        if (spec.quick_exit) {
          std::fflush(nullptr);
          ::_exit(code);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: uncaught: %s\n", r, e.what());
        code = 99;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(pids.size(), -1);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t left = pids.size();
  bool told_late = false;
  while (left > 0) {
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      pid_t w = ::waitpid(pids[i], &st, WNOHANG);
      if (w == pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left == 0) break;
    bool others_done = !spec.stopped_ranks.empty();
    for (std::size_t i = 0; i < pids.size(); ++i)
      if (codes[i] == -1 && std::find(spec.stopped_ranks.begin(), spec.stopped_ranks.end(),
                                      static_cast<int>(i)) == spec.stopped_ranks.end())
        others_done = false;
    const bool late = std::chrono::steady_clock::now() > deadline;
    if (others_done || late) {
      for (std::size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -1) {
          // Say so (once): otherwise the only trace is an exit code 137 among the expectations.
          if (late && !told_late)
            std::fprintf(stderr,
                         "run_ranks: rank %zu still running after the %lld s limit: killed\n", i,
                         static_cast<long long>(
                             std::chrono::duration_cast<std::chrono::seconds>(limit).count()));
          ::kill(pids[i], SIGKILL);
          ::kill(pids[i], SIGCONT);
        }
      told_late = told_late || late;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return codes;
}

/// Reports a check failure from inside a rank and remembers it.
#define RANK_CHECK(cond, ...)                                                                     \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", comm.rank(), __FILE__, __LINE__, \
                   #cond);                                                                        \
      std::fprintf(stderr, __VA_ARGS__);                                                          \
      std::fprintf(stderr, "\n");                                                                 \
      ++errors;                                                                                   \
    }                                                                                             \
  } while (0)

}  // namespace spark::test
