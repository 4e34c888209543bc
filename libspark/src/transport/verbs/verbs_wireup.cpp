#include "transport/verbs/verbs_wireup.hpp"
#include "fabric/rdma_lanes.hpp"

namespace spark::transport {

VerbsOptions verbs_options(const config::Config& config, std::uint32_t timeout_ms,
                           std::size_t slots, std::size_t slot_bytes) {
  VerbsOptions o;
  if (auto lanes = config.lanes()) {
    o.devices = spark::fabric::parse_rdma_devices(*lanes, "SPARK_LANES");
  } else if (auto hca = config.ib_hca()) {
    o.devices = spark::fabric::parse_rdma_devices(*hca, "SPARK_IB_HCA");
  }
  o.gid_index = config.ib_gid_index();
  o.timeout_ms = timeout_ms;
  o.slots = slots;
  o.slot_bytes = slot_bytes;
  return o;
}

std::unique_ptr<VerbsTransport> start_roce(bootstrap::Bootstrap& boot, int rank, int size,
                                           const std::vector<int>& peers, std::uint32_t timeout_ms,
                                           std::size_t slots, std::size_t slot_bytes) {
  auto t = std::make_unique<VerbsTransport>(
      rank, size, peers,
      verbs_options(config::Config::from_environment(), timeout_ms, slots, slot_bytes));
  boot.put("spark.roce", bootstrap::as_bytes(t->endpoint()));
  return t;
}

void finish_roce(bootstrap::Bootstrap& boot, VerbsTransport& transport,
                 const std::vector<int>& peers) {
  std::vector<std::string> endpoints(static_cast<std::size_t>(boot.size()));
  for (int r : peers)
    endpoints[static_cast<std::size_t>(r)] = bootstrap::to_string(boot.get(r, "spark.roce"));
  transport.connect_all(endpoints);
}

}  // namespace spark::transport
