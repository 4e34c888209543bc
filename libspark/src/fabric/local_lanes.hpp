// This node's tcp lanes: its up, non-loopback IPv4 interfaces (one lane each), optionally
// restricted to the data networks in SPARK_DATA_NET so a control-only interface is never
// used for data. Sorted by interface name so every run numbers lanes the same way.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "fabric/fabric_map.hpp"

namespace spark::fabric {

/// "10.1.0.0/16,10.2.0.0/16" -> CIDRs; "" -> empty (all). Strict; `what` names the knob.
std::vector<std::pair<std::uint32_t, int>> parse_nets(std::string_view text, std::string_view what);
std::vector<Lane> local_lanes(const std::vector<std::pair<std::uint32_t, int>>& nets);

}  // namespace spark::fabric
