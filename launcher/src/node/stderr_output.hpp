// Writing sparkrun's own lines and forwarded rank output to a file descriptor, shared by the
// local node runner and the multi-host launcher.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace spark::launch {

/// Writes all of data; retries on EINTR and on a non-blocking fd left by someone else; drops
/// the rest when nobody reads any more (EPIPE).
void write_all(int fd, std::string_view data);

/// Where sparkrun's lines say they come from. A node daemon (a job across hosts) sets its
/// host's name once, at its start; from then on every line it prints (failure lines, -v
/// traces, its own errors) and every failure it reports to the launcher starts "host H: ".
/// The launcher itself, and a job on one host, leave it empty: their lines are unchanged
/// (the launcher's lines about a host name it themselves). docs/multihost.md.
void set_line_host(std::string host);
/// `line` with this process's host prefix ("host H: LINE"), or `line` when none is set.
std::string host_line(const std::string& line);

/// "sparkrun: [host H: ]LINE" on stderr.
void say(const std::string& line);

/// "sparkrun: [host H: ]  12.345 ms WHAT" on stderr: time since t0, for -v launch traces.
void say_elapsed(std::chrono::steady_clock::time_point t0, const std::string& what);

}  // namespace spark::launch
