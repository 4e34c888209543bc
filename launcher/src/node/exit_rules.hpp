// sparkrun's exit status, decided from the first failure (pure; see docs/user-guide.md):
//   0    every rank exited 0
//   N    the first failing rank exited with status N
//   128+S  the first failing rank was killed by signal S (or sparkrun got SIGINT/SIGTERM)
//   S    the first failure was PMIx_Abort(S) (1 when S is 0)
//   124  --timeout expired
//   127  a rank's program could not be started
// Ranks that die after the group abort began (from our SIGTERM/SIGKILL) do not count.
#pragma once

#include <sys/types.h>
#include <optional>
#include <string>

namespace spark::launch {

inline constexpr int kExitTimeout = 124;
inline constexpr int kExitCannotStart = 127;

class ExitTracker {
 public:
  /// A rank ended; `wait_status` is from waitpid. Returns true when this is the first
  /// failure (the caller starts the group abort and prints failure_line()).
  bool rank_ended(int rank, pid_t pid, int wait_status);
  /// The rank called PMIx_Abort(status, message).
  bool rank_aborted(int rank, pid_t pid, int status, const std::string& message);
  /// The rank's program could not be started (`reason`: "PATH: strerror").
  bool start_failed(int rank, const std::string& reason);
  bool timed_out(double seconds);
  /// sparkrun itself got SIGINT/SIGTERM/SIGHUP.
  bool interrupted(int signo);

  bool failed() const { return code_.has_value(); }
  int exit_code() const { return code_.value_or(0); }
  /// The line for stderr about the first failure (without "sparkrun: " and newline).
  const std::string& failure_line() const { return line_; }
  /// The line for a later event (another abort message, another failure) or empty when
  /// nothing needs saying.
  static std::string describe_end(int rank, pid_t pid, int wait_status);

 private:
  bool first(int code, std::string line);
  std::optional<int> code_;
  std::string line_;
};

/// "rank R (pid P) is stopped (...)" when /proc says the process is stopped or traced (a rank
/// under SIGSTOP or a debugger holds its peers, and inside its PMIx handshake the PMIx server,
/// until their timeouts); nothing when it runs or is gone. Said when a job fails.
std::optional<std::string> stopped_note(int rank, pid_t pid);

}  // namespace spark::launch
