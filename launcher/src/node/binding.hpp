// sparkrun's binding step (owned by the topology part): turns --bind-to/--map-by/--topology/
// --report-bindings into a spark::topo plan for this node's ranks and fills the node runner's
// per-rank cpusets, SPARK_CPUSET and SPARK_LANES.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "node_runner.hpp"
#include "options.hpp"

namespace spark::launch {

struct BindingOptions {
  std::string bind_to;   // "" = fast (the default; not binding when ranks would share cores)
  std::string map_by;    // "" = slot
  std::string topology;  // hwloc XML to plan for instead of this machine ("" = this machine)
  bool report_bindings = false;
  // --nccl-env: each rank gets NCCL_IB_HCA / NCCL_IB_GID_INDEX for its lanes and
  // NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME = spec.control_interface (nccl_env.hpp).
  bool nccl_env = false;
};

BindingOptions binding_options(const Options& o);

/// hwloc dlopens its plugins (PCI, OpenCL, GL, CUDA, libxml2...) in the first
/// hwloc_topology_init of a process: ~10-30 ms that binding never needs (live NICs come from
/// sysfs; XML files load with hwloc's built-in parser). Sets HWLOC_PLUGINS_BLACKLIST in
/// sparkrun's own environment (not the ranks'), unless the user set it. Call before any hwloc
/// use; the node runner's LocalTopology sets the same list.
void skip_unneeded_hwloc_plugins();

/// Why the ranks of a node use no RDMA lane, "" when they may: SPARK_TRANSPORT=tcp or shm, or
/// auto (shm within a node, roce across nodes) in a one-node job or on a machine without an
/// RDMA NIC. Only when they may are SPARK_IB_HCA / NCCL_IB_HCA resolved against the machine's
/// NICs (a name it does not have is refused; otherwise the variable is left to the ranks).
std::string why_no_rdma_lanes(std::string_view transport, std::size_t nodes,
                              bool machine_has_lanes);

/// Plans the binding of spec.plan.nodes[spec.node]'s ranks. Reads SPARK_TOPOLOGY_XML,
/// SPARK_TRANSPORT, SPARK_IB_HCA and NCCL_IB_HCA from spec.exports, then spec.base_env (the HCA
/// names only when why_no_rdma_lanes() is ""). Fills spec.cpusets,
/// cpuset_text and lanes when the plan applies to this machine; prints the --report-bindings
/// table and notes on `err`. With b.nccl_env fills spec.nccl_env. A user's HCA list that names
/// one PCIe half of a CX7 port gets a note. Throws UsageError for requests that cannot be met.
void plan_node_binding(const BindingOptions& b, NodeRunSpec& spec, std::FILE* err = stderr);

}  // namespace spark::launch
