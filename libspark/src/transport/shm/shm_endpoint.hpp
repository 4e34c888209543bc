// The shm transport's endpoint: what a rank publishes for the peers of its node and what they
// parse at attach (text that another process wrote: a peer's input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spark::transport {

/// What a rank publishes for the peers of its node (ShmTransport::endpoint) and attach reads,
/// the one place of its format: "segment;pid;pid-namespace;probe-address;cookie". The probe
/// word at probe-address in the rank's memory holds the random cookie: peers read it and
/// write it back to test cross-memory attach.
struct ShmEndpoint {
  std::string segment;
  int pid = 0;
  std::string pid_namespace;  ///< inode number of /proc/self/ns/pid, or "?"
  std::uint64_t probe = 0;    ///< address of the probe word (never 0)
  std::uint64_t cookie = 0;   ///< its value (never 0)

  std::string text() const;
  /// Reads text(): exactly five fields, the numbers through the project's strict parser.
  /// Throws BootstrapError naming the endpoint, `from_rank` and the field that is wrong.
  static ShmEndpoint parse(std::string_view text, int from_rank);
};

}  // namespace spark::transport
