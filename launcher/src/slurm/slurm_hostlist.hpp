// SLURM's compressed list syntaxes, expanded strictly (pure functions, no environment):
//   host lists      "spark[1-3,5]", "a,b[01-02]", "node[1-2]-ib", "rack[1-2]-n[1-2]"
//   per-node counts "2(x3),1"  (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE)
// Malformed input throws SlurmError naming the variable, the text and what is wrong; it is
// never silently shortened or turned into 0.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "spark/error.hpp"
#include "spark/topo/cpulist.hpp"

namespace spark::launch::slurm {

/// A SLURM variable or allocation that sparkrun cannot use.
class SlurmError : public spark::Error {
 public:
  using spark::Error::Error;
};

/// Refuses lists that would expand to more hosts than this (a typo such as "n[1-1000000000]"
/// must not exhaust memory).
inline constexpr std::size_t kMaxHosts = 65536;

/// Expands a host list. Top-level commas separate entries; inside brackets, commas separate
/// ranges "N" or "N-M" (N <= M). Numbers are zero-padded to the width of the range's lower
/// bound as written ("b[01-02]" -> b01 b02, "n[8-11]" -> n8 ... n11), as SLURM does. Several
/// bracket groups in one entry expand as a product, leftmost slowest ("r[1-2]n[1-2]" ->
/// r1n1 r1n2 r2n1 r2n2). Text after the last group is a suffix ("node[1-2]-ib"). Order and
/// duplicates are kept. `what` names the source in error messages (e.g. "SLURM_JOB_NODELIST").
std::vector<std::string> expand_hostlist(std::string_view text,
                                         std::string_view what = "host list");

/// Expands a per-node count list: entries "N" or "N(xR)" (N repeated R >= 1 times), separated
/// by commas: "2(x3),1" -> {2, 2, 2, 1}. Counts may be 0 (a node without tasks).
std::vector<int> expand_counts(std::string_view text, std::string_view what = "count list");

/// Cpu lists are formatted by the topology part ({0,1,2,5} -> "0-2,5").
using spark::topo::format_cpu_list;

}  // namespace spark::launch::slurm
