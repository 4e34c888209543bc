#include "verbs/port.hpp"

#include <algorithm>

#include "verbs/verbs_error.hpp"

namespace spark::verbs {

std::vector<std::string> device_names() {
  int err = 0;
  DeviceList list(&err);
  if (list.size() == 0) throw VerbsError(no_device_message(err, ""));
  std::vector<std::string> names;
  for (int i = 0; i < list.size(); ++i) names.emplace_back(ibv_get_device_name(list[i]));
  std::sort(names.begin(), names.end());
  return names;
}

std::uint32_t OpenPort::ipv4() const noexcept {
  return gid_ipv4(gid.gid);
}

OpenPort open_port(const std::string& device, int port, std::string_view sysfs_root,
                   const std::optional<std::string>& gid_override, int cq_entries) {
  OpenPort p;
  p.port = port;
  p.ctx = open_device(device);
  p.name = p.ctx.device();
  p.info = query_port(p.ctx, port);
  if (p.info.state != IBV_PORT_ACTIVE)
    throw VerbsError("port " + std::to_string(port) + " of " + device + " is not active (state " +
                     ibv_port_state_str(p.info.state) +
                     "): check the cable and `ip link` of its netdev, or drop it from "
                     "SPARK_LANES / SPARK_IB_HCA");
  p.gid = select_gid(sysfs_root, device, port, gid_override);
  p.pd = alloc_pd(p.ctx);
  p.cq = create_cq(p.ctx, cq_entries);
  return p;
}

Endpoint local_endpoint(const OpenPort& p, const QueuePair& qp, const MemoryRegion& mr,
                        const void* addr, std::size_t bytes) {
  Endpoint ep;
  ep.device = p.name;
  ep.port = static_cast<std::uint8_t>(p.port);
  ep.gid_index = static_cast<std::uint32_t>(p.gid.index);
  ep.gid = p.gid.gid;
  ep.qpn = qp->qp_num;
  ep.psn = random_psn();
  ep.mtu = static_cast<std::uint32_t>(p.mtu());
  ep.addr = reinterpret_cast<std::uintptr_t>(addr);
  ep.bytes = bytes;
  ep.rkey = mr->rkey;
  return ep;
}

}  // namespace spark::verbs
