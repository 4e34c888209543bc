// The machine as binding sees it: plain data extracted once from a Topology, so that plans
// and reports are cheap and testable without hwloc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spark/topo/topology.hpp"

namespace spark::topo {

/// One core (all its allowed hardware threads).
struct Core {
  std::vector<int> cpus;  ///< OS cpu numbers (PU os_index), sorted
  int kind = 0;           ///< index into MachineInfo::kinds (0 = fastest)
  int cluster = -1;       ///< index into MachineInfo::clusters, -1 without an L3
  unsigned max_mhz = 0;   ///< 0 when unknown
};

/// An L3 cache and the cores under it.
struct Cluster {
  std::string name;  ///< "L3#1" (hwloc logical index)
  std::uint64_t size_bytes = 0;
  std::vector<int> cpus;  ///< allowed cpus under it
};

struct CoreKind {
  std::string name;  ///< "Cortex-X925", "IntelCore", or "uniform"
  std::vector<int> cpus;
  unsigned max_mhz = 0;
};

/// Which evidence decided the core kinds, and what the other sources said.
struct KindDecision {
  std::string source;  ///< "hwloc cpukinds", "MIDR part number", "sysfs cpu_capacity", ...
  std::string detail;  ///< e.g. "confirmed by MIDR part number" or the disagreement
  bool cpukinds_trusted = false;
};

/// One RDMA-capable NIC function (a "lane"): Mellanox/NVIDIA PCI vendor 0x15b3.
struct Lane {
  std::string name;            ///< the OpenFabrics device ("rocep1s0f0"), else the net device
  std::string rdma;            ///< OpenFabrics OS device, "" when none
  std::string net;             ///< net OS device ("enp1s0f0np0"), "" when none
  std::string pci_busid;       ///< "0000:01:00.0"
  std::string link;            ///< PCIe link it hangs off: "domain:bus", e.g. "0002:01"
  int function = 0;            ///< PCI function number (the port on a CX7)
  std::vector<int> near_cpus;  ///< allowed cpus of its non-I/O parent
};

struct Gpu {
  std::string name;  ///< model when known, else "PCI [10de:2e12]"
  std::string pci_busid;
  std::string osdev;  ///< "cuda0", "card1", ... or ""
  std::vector<int> near_cpus;
};

struct MachineInfo {
  std::string source;  ///< Topology::source()
  bool this_system = false;
  bool io_probed = false;   ///< NICs/GPUs were looked for
  std::vector<int> cpus;    ///< all allowed cpus
  std::vector<Core> cores;  ///< ranked best first: kind, max frequency, L3 size, cpu number
  std::vector<Cluster> clusters;
  std::vector<CoreKind> kinds;  ///< best first
  KindDecision decision;
  std::vector<Lane> lanes;  ///< ordered by PCI bus id
  std::vector<Gpu> gpus;
};

/// Extracts the machine from a loaded topology (kinds cross-checked, cores ranked).
MachineInfo machine_info(const Topology& topology);

}  // namespace spark::topo
