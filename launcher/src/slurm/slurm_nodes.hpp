// Where the launcher can reach the nodes of a SLURM allocation. Node names need not be host
// names (NodeName=sn1 NodeAddr=10.0.0.2): when a name does not resolve, slurmctld knows the
// node's address (NodeAddr), which is what SLURM itself uses to reach it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace spark::launch::slurm {

/// NodeName -> NodeAddr from `scontrol -o show node` output (one line per node, fields
/// "Key=value" separated by spaces). Lines without both fields are skipped.
std::map<std::string, std::string> parse_node_addresses(std::string_view scontrol_output);

/// For the nodes whose names do not resolve to an IPv4 address here: their NodeAddr, asked
/// of slurmctld with one `scontrol -o show node A,B,...` (bounded to 10 s). Nodes that
/// resolve, or that scontrol does not know, are left out (the caller then uses the name).
std::map<std::string, std::string> unresolved_node_addresses(const std::vector<std::string>& nodes);

}  // namespace spark::launch::slurm
