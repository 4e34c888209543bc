// Starting one rank: vfork-style clone + exec with a close-on-exec status pipe. Between
// clone and exec the child makes only async-signal-safe calls (everything it needs is
// prepared before); a failing step writes {stage, errno} into the pipe and the parent
// formats the message.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace spark::launch {

struct SpawnRequest {
  std::string path;               // resolved program path (see resolve_program)
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> envp;  // "NAME=value"
  std::string cwd;                // the rank's working directory (chdir before exec); "": ours
  int stdin_fd = -1;              // -1: /dev/null
  int stdout_fd = -1;             // -1: inherit
  int stderr_fd = -1;             // -1: inherit
  // Binding hook: the topology part fills this per rank; applied with sched_setaffinity in
  // the child before exec.
  std::optional<cpu_set_t> cpuset;
};

/// A forked child whose exec result is not known yet.
struct StartedChild {
  pid_t pid = -1;
  int status_fd = -1;  // read end of the CLOEXEC pipe
};

/// Starts the child (own process group, SIGKILL when sparkrun dies, default signal state).
/// Throws std::system_error when clone or pipe fail.
StartedChild start_child(const SpawnRequest& req);

/// Waits for the child's exec: nullopt on success, else "PATH: reason". Closes status_fd.
std::optional<std::string> await_exec(StartedChild& child, const std::string& path);

/// execvp-like lookup done in the parent: a name without '/' is searched in `path_env`
/// (PATH). Returns the path to exec, or nullopt when no executable was found.
std::optional<std::string> resolve_program(const std::string& name, const std::string& path_env);

}  // namespace spark::launch
