#include "transport/verbs/roce_choice.hpp"

namespace spark::transport {

namespace {
bool wants_rdma(const CommOptions& o) {
  return o.transport == "auto" || o.transport == "roce";
}
}  // namespace

void publish_rdma_facts(bootstrap::Bootstrap& boot, const CommOptions& options,
                        bool several_nodes) {
  if (!several_nodes || !wants_rdma(options)) return;
  const auto f = fabric::local_roce_facts(options.ib_hca, options.data_net, options.rdma_lanes);
  boot.put("spark.rdma.lanes", bootstrap::as_bytes(f.lanes));
  boot.put("spark.rdma.prefer", bootstrap::as_bytes(f.prefer));
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
