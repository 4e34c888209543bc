// The one error type of the launcher's front end: bad command-line input. sparkrun and its
// subcommands print it with report_usage_error and exit 2 before anything is started.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

namespace spark::launch {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitUsage = 2;

/// The one wording of a usage error, for sparkrun and every subcommand (`command`, e.g.
/// "sparkrun doctor"). Returns kExitUsage.
inline int report_usage_error(const std::string& message, const std::string& command = "sparkrun") {
  std::fprintf(stderr, "sparkrun: error: %s\nRun '%s --help' for usage.\n", message.c_str(),
               command.c_str());
  return kExitUsage;
}

}  // namespace spark::launch
