// Where a subcommand finds the rank-side program it starts (libspark/tools): the path in its
// knob (SPARK_DOCTOR_PROBE, SPARK_FABRIC_DISCOVER), the build tree's, or the one next to
// sparkrun (as installed; the same path on every host).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace spark::launch {

inline std::string tool_program(const char* knob, const char* build_path, const char* file_name) {
  if (const char* p = std::getenv(knob); p && *p) return p;
  if (std::filesystem::exists(build_path)) return build_path;
  std::error_code ec;
  return (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / file_name).string();
}

}  // namespace spark::launch
