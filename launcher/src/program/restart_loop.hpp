// --max-restarts (docs/launcher.md, "Restarting a failed job"): the whole rank group is started
// again after a rank's failure, as torchrun's --max-restarts does. Never a partial restart and
// never a reconnect inside a job: each attempt is a new job (new job id, PMIx namespace, job
// dir, token), run in a child process of its own that ends with the attempt, so nothing of a
// failed attempt (PMIx server state, ranks, /dev/shm segments, job dir) survives into the next.
#pragma once

#include <functional>
#include <string>

namespace spark::launch {

struct RestartPolicy {
  int max_restarts = 0;    // --max-restarts N: up to N attempts after the first
  double backoff_s = 1.0;  // --restart-backoff SECONDS: pause before each restart
};

/// What one attempt is told.
struct Attempt {
  int count = 0;  // 0 on the first attempt: the ranks' SPARK_RESTART_COUNT
  int max_restarts = 0;
  /// To be called with the attempt's first failure line (ExitTracker::failure_line, or the
  /// coordinator's): an attempt that ends non-zero without one is a launcher error, which is
  /// not restarted. Empty when there are no restarts.
  std::function<void(const std::string& line)> report;
};

/// --output-dir DIR of an attempt: DIR/attempt.K (K = count) when there are restarts, so that
/// a failed attempt's output is kept; DIR itself without.
std::string attempt_output_dir(const std::string& dir, const Attempt& attempt);

/// Why an attempt that failed with exit code `code` is not restarted, or empty when it is
/// (pure: exit codes of exit_rules.hpp).
std::string no_restart_reason(int code);

/// Runs `job` (one whole attempt; returns sparkrun's exit code). With policy.max_restarts 0 it
/// runs once, here. Otherwise each attempt runs in a forked child process while this one
/// forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it (they must be blocked, as
/// main() does); a failed attempt is reported ("attempt 1 of 3 failed: ...; restarting in 1 s")
/// and started again after the back-off unless no_restart_reason says otherwise or sparkrun was
/// asked to stop. Returns the last attempt's exit code.
int run_with_restarts(const RestartPolicy& policy, const std::function<int(const Attempt&)>& job);

}  // namespace spark::launch
