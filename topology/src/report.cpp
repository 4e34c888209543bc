// Text for people: the --report-bindings table and `sparkrun topo`.
#include <algorithm>
#include <array>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/plan.hpp"

namespace spark::topo {

namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// Left-aligned columns two spaces apart; the last column is not padded.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string format_report(const Plan& plan, std::string_view host, int first_rank) {
  std::vector<std::vector<std::string>> rows{{"host", "rank", "cores", "kind", "L3", "lanes"}};
  for (const auto& r : plan.ranks) {
    std::string cores = r.cpus.empty() ? "unbound" : r.cpuset;
    if (r.shared) cores += " (shared)";
    rows.push_back({std::string(host), std::to_string(first_rank + r.local_rank), cores, r.kind,
                    r.l3, r.lanes.empty() ? "-" : join(r.lanes, ",")});
  }
  std::string out = table(rows);
  for (const auto& n : plan.notes) out += "note: " + n + "\n";
  return out;
}

std::string describe(const MachineInfo& m) {
  std::string out = "machine: " + m.source +
                    (m.this_system ? "" : " (not this system: plans are shown, never applied)") +
                    "\n";
  out += "cpus: " + format_cpu_list(m.cpus) + " (" + std::to_string(m.cores.size()) + " cores)\n";
  if (m.decision.source == "uniform") {
    out += "core kinds: one (" + m.decision.detail + "):\n";
  } else {
    out += "core kinds, fastest first (decided by " + m.decision.source + "; " + m.decision.detail +
           "):\n";
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : m.kinds) {
    rows.push_back({"  " + k.name, "cpus " + format_cpu_list(k.cpus),
                    k.max_mhz ? "max " + std::to_string(k.max_mhz) + " MHz" : "max MHz unknown"});
  }
  out += table(rows);
  if (!m.kinds.empty()) out += "fast cores: " + format_cpu_list(m.kinds.front().cpus) + "\n";

  out += "L3 clusters, best first:\n";
  // Order clusters by their best core (m.cores is ranked).
  std::vector<int> order;
  for (const auto& c : m.cores) {
    if (c.cluster >= 0 && std::find(order.begin(), order.end(), c.cluster) == order.end()) {
      order.push_back(c.cluster);
    }
  }
  rows.clear();
  for (int idx : order) {
    const Cluster& cl = m.clusters[idx];
    std::vector<int> fast;
    for (const auto& c : m.cores) {
      if (c.cluster == idx && c.kind == 0) fast.insert(fast.end(), c.cpus.begin(), c.cpus.end());
    }
    rows.push_back({"  " + cl.name, format_size(cl.size_bytes), "cpus " + format_cpu_list(cl.cpus),
                    "fast " + (fast.empty() ? std::string("none") : format_cpu_list(fast))});
  }
  if (order.empty()) rows.push_back({"  none"});
  out += table(rows);

  out += "NIC lanes (PCI vendor 0x15b3):\n";
  rows.clear();
  if (!m.io_probed) {
    rows.push_back({"  not probed"});
  } else if (m.lanes.empty()) {
    rows.push_back({"  none: no NIC found, binding by core speed only"});
  }
  for (const auto& l : m.lanes) {
    rows.push_back({"  " + l.name, "net " + (l.net.empty() ? std::string("-") : l.net),
                    "PCI " + l.pci_busid, "PCIe link " + l.link,
                    "near cpus " + format_cpu_list(l.near_cpus)});
  }
  out += table(rows);
  if (m.io_probed) {
    if (m.gpus.empty()) out += "GPU: none\n";
    for (const auto& g : m.gpus) {
      out += "GPU: " + g.name + " (PCI " + g.pci_busid + (g.osdev.empty() ? "" : ", " + g.osdev) +
             ", near cpus " + format_cpu_list(g.near_cpus) + ")\n";
    }
  }
  return out;
}

std::string describe(const Topology& topology) {
  return describe(machine_info(topology));
}

}  // namespace spark::topo
