#include "local_topology.hpp"

#include <hwloc.h>

#include <cstdlib>

namespace spark::launch {

LocalTopology::LocalTopology() {
  // hwloc dlopens its plugins (PCI, OpenCL, GL with libX11, libxml2 with ICU) in the first
  // hwloc_topology_init of the process: ~10 ms for objects sparkrun never asks for. The
  // variable is set in sparkrun's own environment only (ranks get the environment sparkrun
  // started with), and a user's own setting wins.
  setenv("HWLOC_PLUGINS_BLACKLIST",
         "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml,hwloc_cuda,hwloc_nvml,hwloc_rsmi,"
         "hwloc_levelzero",
         0);
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) return;
  // The x86 backend binds this thread to every cpu in turn to run cpuid there (several ms
  // of migrations on a busy machine); Linux's sysfs already gives what PMIx needs.
  hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  // Defaults already leave I/O objects out; keep it that way explicitly, and skip the
  // instruction caches, which nobody here uses.
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_icache_types_filter(t, HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return;
  }
  topo_ = t;
}

LocalTopology::~LocalTopology() {
  if (topo_ != nullptr) hwloc_topology_destroy(static_cast<hwloc_topology_t>(topo_));
}

}  // namespace spark::launch
