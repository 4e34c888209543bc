// Turns an hwloc topology into MachineInfo: cores with decided kinds, L3 clusters, lanes, GPUs.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>

#include "hwloc_util.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/kinds.hpp"
#include "spark/topo/machine.hpp"
#include "sysfs_io.hpp"

namespace spark::topo {

namespace {

using detail::allowed_cpus;
using detail::make_bitmap;
using detail::to_cpus;

// Parses "0xd85" (base 16) or "997" (base 10); 0 when absent or malformed.
unsigned info_number(hwloc_obj_t obj, const char* name, int base) {
  const char* text = obj != nullptr ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  if (text == nullptr) return 0;
  std::string_view v(text);
  if (base == 16) {
    if (v.size() < 3 || v[0] != '0' || (v[1] != 'x' && v[1] != 'X')) return 0;
    v.remove_prefix(2);
  }
  unsigned out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  return (ec == std::errc() && ptr == v.data() + v.size()) ? out : 0;
}

// The value on the PU or its Core (XML fixtures and future hwloc put per-core facts there).
unsigned pu_or_core_info(hwloc_obj_t pu, const char* name, int base) {
  unsigned v = info_number(pu, name, base);
  if (v == 0 && pu->parent != nullptr && pu->parent->type == HWLOC_OBJ_CORE) {
    v = info_number(pu->parent, name, base);
  }
  return v;
}

std::string pci_busid(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(p.domain),
                static_cast<unsigned>(p.bus), static_cast<unsigned>(p.dev),
                static_cast<unsigned>(p.func));
  return buf;
}

std::string pci_link(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04x:%02x", static_cast<unsigned>(p.domain),
                static_cast<unsigned>(p.bus));
  return buf;
}

std::vector<int> near_cpus(hwloc_topology_t topo, hwloc_obj_t io, hwloc_const_bitmap_t allowed) {
  hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topo, io);
  return parent != nullptr && parent->cpuset != nullptr ? allowed_cpus(parent->cpuset, allowed)
                                                        : std::vector<int>{};
}

void find_io(hwloc_topology_t topo, hwloc_const_bitmap_t allowed, MachineInfo& m) {
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const auto& p = pci->attr->pcidev;
    const unsigned base_class = p.class_id >> 8;
    if (p.vendor_id == 0x15b3 && (base_class == 0x02)) {  // network or InfiniBand controller
      Lane lane;
      lane.pci_busid = pci_busid(p);
      lane.link = pci_link(p);
      lane.function = p.func;
      for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
        if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
        if (child->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) lane.rdma = child->name;
        if (child->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) lane.net = child->name;
      }
      lane.name = !lane.rdma.empty() ? lane.rdma : !lane.net.empty() ? lane.net : lane.pci_busid;
      lane.near_cpus = near_cpus(topo, pci, allowed);
      m.lanes.push_back(std::move(lane));
    } else if ((p.vendor_id == 0x10de || p.vendor_id == 0x1002) && base_class == 0x03) {
      Gpu gpu;
      gpu.pci_busid = pci_busid(p);
      for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
        if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
        if (gpu.osdev.empty()) gpu.osdev = child->name;
        if (const char* model = hwloc_obj_get_info_by_name(child, "GPUModel")) gpu.name = model;
      }
      if (gpu.name.empty()) {
        if (const char* dev = hwloc_obj_get_info_by_name(pci, "PCIDevice")) gpu.name = dev;
      }
      if (gpu.name.empty()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "PCI [%04x:%04x]", static_cast<unsigned>(p.vendor_id),
                      static_cast<unsigned>(p.device_id));
        gpu.name = buf;
      }
      gpu.near_cpus = near_cpus(topo, pci, allowed);
      m.gpus.push_back(std::move(gpu));
    }
  }
  std::sort(m.lanes.begin(), m.lanes.end(),
            [](const Lane& a, const Lane& b) { return a.pci_busid < b.pci_busid; });
}

}  // namespace

MachineInfo machine_info(const Topology& topology) {
  hwloc_topology_t topo = topology.get();
  MachineInfo m;
  m.source = topology.source();
  m.this_system = topology.is_this_system();
  m.io_probed = topology.has_io();

  auto allowed = make_bitmap();
  hwloc_bitmap_and(allowed.get(), hwloc_topology_get_topology_cpuset(topo),
                   hwloc_topology_get_allowed_cpuset(topo));
  m.cpus = to_cpus(allowed.get());
  if (m.cpus.empty()) throw TopologyError("topology " + m.source + " has no usable cpus");

  // Cores; topologies without Core objects get one "core" per PU.
  hwloc_obj_type_t core_type =
      hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  std::vector<hwloc_obj_t> core_objs;
  for (hwloc_obj_t obj = nullptr; (obj = hwloc_get_next_obj_by_type(topo, core_type, obj));) {
    if (hwloc_bitmap_intersects(obj->cpuset, allowed.get())) core_objs.push_back(obj);
  }

  // L3 clusters.
  std::vector<hwloc_obj_t> l3_objs;
  for (hwloc_obj_t obj = nullptr;
       (obj = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, obj));) {
    if (!hwloc_bitmap_intersects(obj->cpuset, allowed.get())) continue;
    Cluster c;
    c.name = "L3#" + std::to_string(obj->logical_index);
    c.size_bytes = obj->attr->cache.size;
    c.cpus = allowed_cpus(obj->cpuset, allowed.get());
    m.clusters.push_back(std::move(c));
    l3_objs.push_back(obj);
  }

  // Evidence per cpu: XML topologies carry it as infos, the live machine in /proc and /sys.
  CpuProbe probe;
  if (!topology.from_xml()) probe = read_cpu_probe(topology.sysfs_root());
  std::vector<CpuEvidence> evidence;
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PU, pu));) {
    if (!hwloc_bitmap_isset(allowed.get(), pu->os_index)) continue;
    CpuEvidence e;
    e.cpu = static_cast<int>(pu->os_index);
    if (topology.from_xml()) {
      e.midr_part = pu_or_core_info(pu, "CPUPart", 16);
      e.capacity = pu_or_core_info(pu, "LinuxCapacity", 10);
      e.max_mhz = pu_or_core_info(pu, "FrequencyMaxMHz", 10);
    } else {
      auto get = [&](const std::map<int, unsigned>& from) {
        auto it = from.find(e.cpu);
        return it != from.end() ? it->second : 0U;
      };
      e.midr_part = get(probe.midr_part);
      e.capacity = get(probe.capacity);
      e.max_mhz = get(probe.max_mhz);
    }
    evidence.push_back(e);
  }

  // hwloc's cpukinds (least powerful first); their FrequencyMaxMHz fills missing frequencies.
  std::vector<HwlocKind> hw_kinds;
  const int nr = hwloc_cpukinds_get_nr(topo, 0);
  for (int i = 0; i < nr; ++i) {
    auto set = make_bitmap();
    int efficiency = -1;
    unsigned nr_infos = 0;
    hwloc_info_s* infos = nullptr;
    if (hwloc_cpukinds_get_info(topo, static_cast<unsigned>(i), set.get(), &efficiency, &nr_infos,
                                &infos, 0) != 0) {
      continue;
    }
    HwlocKind k;
    k.cpus = to_cpus(set.get());
    k.efficiency = efficiency;
    unsigned mhz = 0;
    for (unsigned j = 0; j < nr_infos; ++j) {
      std::string_view name(infos[j].name);
      if (name == "CoreType") k.core_type = infos[j].value;
      if (name == "FrequencyMaxMHz") {
        std::string_view v(infos[j].value);
        std::from_chars(v.data(), v.data() + v.size(), mhz);
      }
    }
    for (auto& e : evidence) {
      if (e.max_mhz == 0 && hwloc_bitmap_isset(set.get(), e.cpu)) e.max_mhz = mhz;
    }
    hw_kinds.push_back(std::move(k));
  }

  std::string uniform = "uniform";
  if (hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0)) {
    if (const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel")) uniform = model;
  }
  KindResult kinds = decide_kinds(evidence, hw_kinds, uniform);
  m.kinds = kinds.kinds;
  m.decision = kinds.decision;

  std::map<int, unsigned> mhz_of;
  for (const auto& e : evidence) mhz_of[e.cpu] = e.max_mhz;
  for (hwloc_obj_t obj : core_objs) {
    Core core;
    core.cpus = allowed_cpus(obj->cpuset, allowed.get());
    core.kind = kinds.kind_of.count(core.cpus.front()) ? kinds.kind_of[core.cpus.front()] : 0;
    core.max_mhz = mhz_of[core.cpus.front()];
    hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_L3CACHE, obj);
    for (std::size_t i = 0; i < l3_objs.size(); ++i) {
      if (l3_objs[i] == l3) core.cluster = static_cast<int>(i);
    }
    m.cores.push_back(std::move(core));
  }
  // Rank: kind first, then max frequency, then L3 size, then cpu number (stable output).
  auto l3_size = [&](const Core& c) {
    return c.cluster >= 0 ? m.clusters[c.cluster].size_bytes : std::uint64_t{0};
  };
  std::stable_sort(m.cores.begin(), m.cores.end(), [&](const Core& a, const Core& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.max_mhz != b.max_mhz) return a.max_mhz > b.max_mhz;
    if (l3_size(a) != l3_size(b)) return l3_size(a) > l3_size(b);
    return a.cpus.front() < b.cpus.front();
  });

  if (topology.has_io()) {
    if (topology.from_xml()) {
      find_io(topo, allowed.get(), m);
    } else {
      detail::find_io_sysfs(topology.sysfs_root(), m);
    }
  }
  return m;
}

}  // namespace spark::topo
