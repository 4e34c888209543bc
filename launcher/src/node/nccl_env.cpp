#include "nccl_env.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "spark/error.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"
#include "verbs/gid.hpp"

namespace spark::launch {

namespace {

const topo::Lane* find_lane(const std::vector<topo::Lane>& machine, const std::string& name) {
  for (const auto& l : machine) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

std::string join(const std::vector<std::string>& items, std::string_view sep = ",") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : std::string(sep)) + i;
  return out;
}

}  // namespace

std::vector<std::string> other_halves(const std::vector<topo::Lane>& machine,
                                      const topo::Lane& lane) {
  // "0000:01:00.0": the domain, then bus:device.function.
  auto split = [](const std::string& busid) {
    const std::size_t colon = busid.find(':');
    return colon == std::string::npos ? std::pair<std::string, std::string>{"", busid}
                                      : std::pair<std::string, std::string>{
                                            busid.substr(0, colon), busid.substr(colon + 1)};
  };
  const auto [domain, rest] = split(lane.pci_busid);
  std::vector<std::string> out;
  for (const auto& other : machine) {
    const auto [d, r] = split(other.pci_busid);
    if (r == rest && d != domain && !other.rdma.empty()) out.push_back(other.name);
  }
  return out;
}

std::optional<std::string> one_half_note(const topo::MachineInfo& info, std::string_view source,
                                         const std::string& spec) {
  // The lanes the list selects, by the binding plan's own rule (every local rank gets them).
  std::vector<std::string> lanes;
  try {
    topo::PlanOptions options;
    options.bind_to = topo::BindTo::none;
    options.hca = spec;
    options.hca_source = std::string(source);
    lanes = topo::make_plan(info, options).ranks.at(0).lanes;
  } catch (const topo::TopologyError&) {
    return std::nullopt;
  }
  const std::vector<topo::Lane>& machine = info.lanes;
  std::vector<std::string> halves, both;
  for (const auto& name : lanes) {
    const topo::Lane* lane = find_lane(machine, name);
    if (lane == nullptr || lane->rdma.empty()) continue;
    std::vector<std::string> missing;
    for (const auto& o : other_halves(machine, *lane)) {
      if (std::find(lanes.begin(), lanes.end(), o) == lanes.end()) missing.push_back(o);
    }
    if (missing.empty()) continue;
    halves.push_back(name);
    both.push_back(name);
    both.insert(both.end(), missing.begin(), missing.end());
  }
  if (halves.empty()) return std::nullopt;
  return std::string(source) + "=" + std::string(spec) + " names one PCIe half of " +
         (halves.size() == 1 ? "a CX7 port" : "CX7 ports") + " (" + join(halves, ", ") +
         "); name both (" + join(both) + ") for full bandwidth (~24 vs ~3 GB/s)";
}

NcclEnv nccl_env(const std::vector<topo::Lane>& machine, const std::vector<std::string>& rank_lanes,
                 const std::string& control_interface, std::string_view ib_root) {
  NcclEnv out;
  std::vector<std::string> devices;
  for (const auto& name : rank_lanes) {
    const topo::Lane* lane = find_lane(machine, name);
    if (lane != nullptr && !lane->rdma.empty()) devices.push_back(lane->rdma);
  }
  if (devices.empty()) {
    out.notes.push_back(
        "--nccl-env: no RDMA device found (no PCI function of vendor 0x15b3 with an "
        "OpenFabrics device): NCCL_IB_HCA and NCCL_IB_GID_INDEX not set" +
        (control_interface.empty() ? std::string()
                                   : "; NCCL and Gloo use sockets on " + control_interface));
  } else {
    // "=": exact names (NCCL matches prefixes otherwise: mlx5_1 would also pick mlx5_10).
    out.vars.emplace_back("NCCL_IB_HCA", "=" + join(devices));
    std::map<int, std::vector<std::string>> by_index;  // GID index -> devices
    for (const auto& dev : devices) {
      try {
        by_index[verbs::select_gid(ib_root, dev, 1, std::nullopt).index].push_back(dev);
      } catch (const spark::Error& e) {
        out.notes.push_back("--nccl-env: no GID index for " + dev + ": " + e.what());
      }
    }
    if (by_index.size() == 1) {
      out.vars.emplace_back("NCCL_IB_GID_INDEX", std::to_string(by_index.begin()->first));
    } else if (by_index.size() > 1) {
      // NCCL_IB_GID_INDEX is one number for every device; NCCL (2.21+) finds the GID per
      // device itself from the RoCE version and address family.
      std::vector<std::string> which;
      for (const auto& [index, devs] : by_index)
        which.push_back(join(devs) + " at " + std::to_string(index));
      out.vars.emplace_back("NCCL_IB_ROCE_VERSION_NUM", "2");
      out.vars.emplace_back("NCCL_IB_ADDR_FAMILY", "AF_INET");
      out.notes.push_back("--nccl-env: the IPv4 RoCE v2 GID is " + join(which, ", ") +
                          ": NCCL_IB_GID_INDEX (one number for every device) not set; "
                          "NCCL_IB_ROCE_VERSION_NUM=2 NCCL_IB_ADDR_FAMILY=AF_INET let NCCL "
                          "2.21+ pick it per device");
    }
  }
  if (!control_interface.empty()) {
    out.vars.emplace_back("NCCL_SOCKET_IFNAME", control_interface);
    out.vars.emplace_back("GLOO_SOCKET_IFNAME", control_interface);
  }
  return out;
}

std::string default_route_interface(const std::filesystem::path& proc_root) {
  // Iface Destination Gateway Flags ... Mask ...; the default route has destination and mask 0.
  std::ifstream in(proc_root / "net" / "route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(words >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask))
      continue;
    if (destination == "00000000" && mask == "00000000") return iface;
  }
  return "";
}

}  // namespace spark::launch
