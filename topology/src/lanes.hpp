// NIC lane choice (internal): HCA overrides and per-rank lane sets.
#pragma once

#include <string>
#include <vector>

#include "spark/topo/machine.hpp"

namespace spark::topo::detail {

/// Indices into `lanes` selected by an NCCL_IB_HCA-style spec, in the spec's order.
/// Throws TopologyError for a malformed spec or a name that matches no lane, listing the lanes
/// that exist.
std::vector<std::size_t> select_lanes(const std::vector<Lane>& lanes, const std::string& spec,
                                      const std::string& source);

/// Automatic lane set for local rank `rank`: one function per PCIe link, so that a rank's
/// traffic is striped over both halves of a CX7; ranks alternate over the functions of a link.
std::vector<std::string> auto_lanes(const std::vector<Lane>& lanes,
                                    const std::vector<std::size_t>& pool, int rank);

/// "rocep1s0f0 (enp1s0f0np0, PCI 0000:01:00.0), ..." for error messages.
std::string list_lanes(const std::vector<Lane>& lanes);

}  // namespace spark::topo::detail
