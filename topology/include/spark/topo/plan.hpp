// Binding plans: which cores and NIC lanes each local rank gets, and how to apply them.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spark/topo/machine.hpp"

namespace spark::topo {

/// --bind-to: what one rank is bound to.
enum class BindTo {
  fast,  ///< a share of the fastest cores (default)
  core,  ///< exactly one core
  l3,    ///< every core under one L3 cache
  none,  ///< not bound
};
/// --map-by: how ranks are placed.
enum class MapBy {
  slot,  ///< fill the best L3 cluster first, spread only when it is used up (default)
  core,  ///< one core per rank, in ranked order
  l3,    ///< round-robin over L3 clusters
};

/// Strict parsers for the command line; throw TopologyError listing the accepted words.
BindTo parse_bind_to(std::string_view text);
MapBy parse_map_by(std::string_view text);
std::string_view to_string(BindTo b);
std::string_view to_string(MapBy m);

struct PlanOptions {
  int local_ranks = 1;
  BindTo bind_to = BindTo::fast;
  MapBy map_by = MapBy::slot;
  /// HCA override in NCCL_IB_HCA syntax ("rocep1s0f0,roceP2p1s0f0", "=mlx5_0", "^mlx5_1",
  /// "mlx5_0:1"); nullopt = automatic. The caller fills it from SPARK_IB_HCA, then NCCL_IB_HCA.
  std::optional<std::string> hca;
  std::string hca_source = "SPARK_IB_HCA";  ///< names the override in error messages
  /// Restrict binding to these cpus ("0-3,8"); nullopt = all allowed cpus.
  std::optional<std::string> cpu_list;
};

/// Fills hca/hca_source from SPARK_IB_HCA, else NCCL_IB_HCA.
void hca_from_env(PlanOptions& options, const EnvLookup& env);

struct RankBinding {
  int local_rank = 0;
  std::vector<int> cpus;           ///< empty when not bound
  std::string cpuset;              ///< "15-19" ("" when not bound)
  std::string kind;                ///< "Cortex-X925", "-" when not bound
  std::string l3;                  ///< "L3#1 16MB", "-" when none
  std::vector<std::string> lanes;  ///< "rocep1s0f0", "roceP2p1s0f0"
  bool shared = false;             ///< another local rank is bound to some of the same cpus
};

struct Plan {
  std::string source;         ///< the machine it was made for
  bool applies_here = false;  ///< false for XML topologies: never apply, only display
  BindTo bind_to = BindTo::fast;
  MapBy map_by = MapBy::slot;
  std::vector<RankBinding> ranks;
  std::vector<std::string> notes;  ///< one line each: sharing, NIC locality, "no NIC found"
};

/// Makes the plan; throws TopologyError for requests that cannot be met (unknown HCA, cpus
/// that do not exist, no ranks).
Plan make_plan(const MachineInfo& machine, const PlanOptions& options);

/// The rank's cpus as a cpu_set_t, computed before fork() so that the child only calls
/// sched_setaffinity (no allocation after fork). Returns false when the rank is not bound.
/// Throws TopologyError for a cpu beyond CPU_SETSIZE.
bool to_cpu_set(const RankBinding& rank, cpu_set_t& out);

/// Async-signal-safe: binds the calling process. Returns 0 or an errno value.
int apply_cpu_set(const cpu_set_t& set) noexcept;

/// The --report-bindings table (host, rank, cores, kind, L3, lanes) followed by the notes.
std::string format_report(const Plan& plan, std::string_view host, int first_rank);

/// `sparkrun topo`: core kinds and the deciding source, fast cores, L3 clusters, NIC lanes
/// with their PCIe link, GPUs.
std::string describe(const MachineInfo& machine);
std::string describe(const Topology& topology);

/// "16MB", "512KB", "1000B".
std::string format_size(std::uint64_t bytes);

}  // namespace spark::topo
