// Which peers RoCE reaches, decided before any transport exists (docs/roce.md, "RDMA lanes
// per peer"). Needs no libibverbs (sysfs and the fabric map only), so the registry uses it in
// every build:
//   publish_rdma_facts(boot, options)   // with the node id, before the first fence
//   auto job = roce_job(setup);         // after it: every rank's identical view
#pragma once

#include <optional>

#include "bootstrap/bootstrap.hpp"
#include "fabric/roce_lanes.hpp"
#include "spark/config/options.hpp"
#include "transport/transport.hpp"

namespace spark::transport {

/// True when this libspark has the RoCE transport (libibverbs found at configure time).
bool roce_built() noexcept;

/// Several nodes and SPARK_TRANSPORT auto or roce: puts this node's RDMA lanes
/// ("spark.rdma.lanes": RDMA functions with an IPv4 RoCE v2 GID, restricted by SPARK_IB_HCA and
/// SPARK_DATA_NET) and this rank's preferred devices ("spark.rdma.prefer": SPARK_LANES). The
/// caller commits. `several_nodes`: the node layout says the job spans nodes.
void publish_rdma_facts(bootstrap::Bootstrap& boot, const CommOptions& options, bool several_nodes);

/// The job's view from those keys, identical on every rank; nullopt when they were not
/// published (one node, tcp or shm forced).
std::optional<fabric::RoceJob> roce_job(const Setup& setup);

}  // namespace spark::transport
