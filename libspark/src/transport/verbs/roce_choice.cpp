#include "transport/verbs/roce_choice.hpp"

#include "fabric/local_lanes.hpp"
#include "fabric/rdma_lanes.hpp"

namespace spark::transport {

namespace {
bool wants_rdma(const CommOptions& o) {
  return o.transport == "auto" || o.transport == "roce";
}
}  // namespace

void publish_rdma_facts(bootstrap::Bootstrap& boot, const CommOptions& options,
                        bool several_nodes) {
  if (!several_nodes || !wants_rdma(options)) return;
  // The map is per node: SPARK_IB_HCA (the user's choice) restricts it; SPARK_LANES (the
  // launcher's per-rank choice) is a preference the map may overrule (fabric/roce_lanes.hpp).
  const auto devs = options.ib_hca ? fabric::parse_rdma_devices(*options.ib_hca, "SPARK_IB_HCA")
                                   : std::vector<std::string>{};
  const auto lanes =
      fabric::local_rdma_lanes(devs, fabric::parse_nets(options.data_net, "SPARK_DATA_NET"));
  std::string prefer;
  if (options.rdma_lanes)
    for (const auto& d : fabric::parse_rdma_devices(*options.rdma_lanes, "SPARK_LANES"))
      prefer += (prefer.empty() ? "" : ",") + d;
  boot.put("spark.rdma.lanes", bootstrap::as_bytes(fabric::encode_lanes(lanes)));
  boot.put("spark.rdma.prefer", bootstrap::as_bytes(prefer));
}

std::optional<fabric::RoceJob> roce_job(const Setup& s) {
  if (s.one_node() || s.options == nullptr || !wants_rdma(*s.options) || s.boot == nullptr)
    return std::nullopt;
  std::vector<std::string> lanes(s.nodes.size()), prefer(s.nodes.size());
  for (std::size_t r = 0; r < s.nodes.size(); ++r) {
    lanes[r] = bootstrap::to_string(s.boot->get(static_cast<int>(r), "spark.rdma.lanes"));
    prefer[r] = bootstrap::to_string(s.boot->get(static_cast<int>(r), "spark.rdma.prefer"));
  }
  return fabric::make_roce_job(s.nodes, lanes, prefer);
}

}  // namespace spark::transport
