// SLURM's compressed lists from the allocation's environment (SLURM_JOB_NODELIST,
// SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE; docs/slurm.md). The first byte chooses the
// parser. Malformed text must be a SlurmError, never a crash or an unbounded expansion.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "slurm_hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if ((data[0] & 1) != 0) {
      const auto hosts = spark::launch::slurm::expand_hostlist(text, "SLURM_JOB_NODELIST");
      if (hosts.size() > spark::launch::slurm::kMaxHosts) __builtin_trap();
    } else {
      (void)spark::launch::slurm::expand_counts(text, "SLURM_TASKS_PER_NODE");
    }
  } catch (const spark::launch::slurm::SlurmError&) {
  }
  return 0;
}
