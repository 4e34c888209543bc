// Host lists from the user: --host values and Open MPI-style hostfiles (docs/launcher.md).
// The first byte chooses the parser; every refusal must be a UsageError naming the problem.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hostfile.hpp"
#include "usage_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const auto hosts = (data[0] & 1) != 0 ? spark::launch::parse_host_list(text)
                                          : spark::launch::parse_hostfile(text, "fuzz.hosts");
    (void)spark::launch::merge_hosts(hosts);
  } catch (const spark::launch::UsageError&) {
  }
  return 0;
}
