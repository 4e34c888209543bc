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

/// "sparkrun: LINE" on stderr.
void say(const std::string& line);

/// "sparkrun:   12.345 ms WHAT" on stderr: time since t0, for -v launch traces.
void say_elapsed(std::chrono::steady_clock::time_point t0, const std::string& what);

}  // namespace spark::launch
