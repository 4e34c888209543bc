// NIC and GPU discovery of the live machine straight from sysfs (internal).
//
// hwloc's PCI discovery costs ~45 ms here, most of it libpciaccess parsing pci.ids twice for
// device names binding never shows; reading the few sysfs files binding needs takes well
// under a millisecond. XML topologies still use hwloc's I/O objects.
#pragma once

#include <filesystem>
#include <vector>

#include "spark/topo/machine.hpp"

namespace spark::topo::detail {

/// Fills m.lanes (PCI vendor 0x15b3, network class) and m.gpus (display class, NVIDIA/AMD)
/// from `root`/sys/bus/pci/devices; near cpus are local_cpulist ∩ m.cpus.
void find_io_sysfs(const std::filesystem::path& root, MachineInfo& m);

}  // namespace spark::topo::detail
