// SPARK_LOG's logger, one per process: a level and an optional subsystem filter (from the
// knob, docs/configuration.md), and one line format for every process of a job:
//
//   HOST:PID [RANK] SUBSYSTEM: TEXT
//
// HOST is the launcher's name for the node (SPARK_HOST; gethostname() without it), RANK the
// rank ("?" until the bootstrap knows it), or "sparkrun" / "daemon" for the launcher and its
// node daemons. Each line is one write(2) to stderr, so lines of threads and processes never
// interleave. libspark's ranks, the launcher and the node daemons all write through it.
//
//   if (log::enabled(log::Level::info, "wireup")) log::line(log::Level::info, "wireup", text);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "spark/config/config.hpp"

namespace spark::log {

using Level = config::LogLevel;

/// The level and subsystems (empty: all) lines must reach to be written. Before any call:
/// warn, every subsystem.
void configure(Level level, std::vector<std::string> subsystems);
/// configure() from a snapshot's SPARK_LOG (callers link spark_config; the logger does not).
inline void configure(const config::Config& config) {
  configure(config.log_level(), config.log_subsystems());
}
/// Who writes: the host part and the [rank] part of every line.
void set_host(std::string host);
void set_rank(std::string rank);
inline void set_rank(int rank) {
  set_rank(std::to_string(rank));
}

/// True when a line of `level` for `subsystem` would be written (build its text only then).
bool enabled(Level level, std::string_view subsystem);
/// Writes one line (no check: call enabled() first).
void line(std::string_view subsystem, std::string_view text);

/// enabled() and line() in one, for text that costs nothing to build.
inline void write(Level level, std::string_view subsystem, std::string_view text) {
  if (enabled(level, subsystem)) line(subsystem, text);
}

}  // namespace spark::log
