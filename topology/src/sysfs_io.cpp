#include "sysfs_io.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <string>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/error.hpp"

namespace spark::topo::detail {

namespace {

std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

unsigned hex(const std::string& text) {
  std::string_view v(text);
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) v.remove_prefix(2);
  unsigned out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out, 16);
  return (!v.empty() && ec == std::errc() && ptr == v.data() + v.size()) ? out : 0;
}

std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> near(const std::filesystem::path& dev, const std::vector<int>& allowed) {
  std::string list = first_line(dev / "local_cpulist");
  std::vector<int> cpus;
  try {
    cpus = parse_cpu_list(list, "local_cpulist");
  } catch (const TopologyError&) {
    return allowed;  // no locality known (e.g. no NUMA information): the whole machine
  }
  std::vector<int> both;
  std::set_intersection(cpus.begin(), cpus.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(both));
  return both;
}

}  // namespace

void find_io_sysfs(const std::filesystem::path& root, MachineInfo& m) {
  const auto devices = root / "sys/bus/pci/devices";
  for (const std::string& bdf : entries(devices)) {
    // "dddd:bb:dd.f"
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    if (bdf.size() != 12 ||
        std::sscanf(bdf.c_str(), "%4x:%2x:%2x.%1x", &domain, &bus, &dev, &func) != 4) {
      continue;
    }
    const auto path = devices / bdf;
    const unsigned vendor = hex(first_line(path / "vendor"));
    const unsigned base_class = hex(first_line(path / "class")) >> 16;
    if (vendor == 0x15b3 && base_class == 0x02) {
      Lane lane;
      lane.pci_busid = bdf;
      lane.link = bdf.substr(0, 7);
      lane.function = static_cast<int>(func);
      auto rdma = entries(path / "infiniband");
      auto net = entries(path / "net");
      lane.rdma = rdma.empty() ? "" : rdma.front();
      lane.net = net.empty() ? "" : net.front();
      lane.name = !lane.rdma.empty() ? lane.rdma : !lane.net.empty() ? lane.net : lane.pci_busid;
      lane.near_cpus = near(path, m.cpus);
      m.lanes.push_back(std::move(lane));
    } else if ((vendor == 0x10de || vendor == 0x1002) && base_class == 0x03) {
      Gpu gpu;
      gpu.pci_busid = bdf;
      char buf[32];
      std::snprintf(buf, sizeof buf, "PCI [%04x:%04x]", vendor, hex(first_line(path / "device")));
      gpu.name = buf;
      for (const auto& card : entries(path / "drm")) {
        if (card.rfind("card", 0) == 0) gpu.osdev = card;
      }
      gpu.near_cpus = near(path, m.cpus);
      m.gpus.push_back(std::move(gpu));
    }
  }
}

}  // namespace spark::topo::detail
