#include "exit_rules.hpp"

#include <sys/wait.h>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace spark::launch {
namespace {

std::string signal_name(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  const char* desc = sigdescr_np(signo);
  std::string s = "signal " + std::to_string(signo);
  if (abbrev != nullptr) s += std::string(" (SIG") + abbrev;
  if (desc != nullptr) s += std::string(abbrev != nullptr ? ": " : " (") + desc;
  if (abbrev != nullptr || desc != nullptr) s += ")";
  return s;
}

}  // namespace

std::string ExitTracker::describe_end(int rank, pid_t pid, int wait_status) {
  std::string who = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (WIFEXITED(wait_status)) {
    return who + " exited with status " + std::to_string(WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    return who + " was killed by " + signal_name(WTERMSIG(wait_status)) +
           (WCOREDUMP(wait_status) ? " (core dumped)" : "");
  }
  return who + " ended (wait status " + std::to_string(wait_status) + ")";
}

bool ExitTracker::first(int code, std::string line) {
  if (code_) return false;
  code_ = code;
  line_ = std::move(line);
  return true;
}

bool ExitTracker::rank_ended(int rank, pid_t pid, int wait_status) {
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) return false;
  int code = 1;
  if (WIFEXITED(wait_status)) code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) code = 128 + WTERMSIG(wait_status);
  return first(code, describe_end(rank, pid, wait_status) + "; stopping the job");
}

bool ExitTracker::rank_aborted(int rank, pid_t pid, int status, const std::string& message) {
  (void)message;  // printed by the runner for every abort, first or not
  return first(status == 0            ? 1
               : (status & 0xff) == 0 ? 1
                                      : status & 0xff,
               "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) +
                   ") called abort with status " + std::to_string(status) + "; stopping the job");
}

bool ExitTracker::start_failed(int rank, const std::string& reason) {
  return first(kExitCannotStart, "cannot start rank " + std::to_string(rank) + ": " + reason);
}

bool ExitTracker::timed_out(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", seconds);
  return first(kExitTimeout, std::string("timeout: the job ran longer than --timeout ") + buf +
                                 " s; stopping every rank (exit 124)");
}

bool ExitTracker::interrupted(int signo) {
  return first(128 + signo, "got " + signal_name(signo) + "; stopping every rank");
}

std::optional<std::string> stopped_note(int rank, pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "PID (COMM) STATE ...": COMM may hold spaces and parentheses, so the last ')' ends it.
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return std::nullopt;
  const char state = stat[close + 2];
  if (state != 'T' && state != 't') return std::nullopt;
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") is stopped (" +
         (state == 't' ? "traced by a debugger" : "SIGSTOP or job control") +
         "): its peers waited for it until their timeouts";
}

}  // namespace spark::launch
