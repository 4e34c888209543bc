#include "spark/topo/topology.hpp"

#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

#include "spark/topo/error.hpp"

namespace spark::topo {

LoadOptions load_options_from_env(const EnvLookup& env) {
  LoadOptions options;
  if (auto xml = env("SPARK_TOPOLOGY_XML")) {
    if (xml->empty()) {
      throw TopologyError(
          "SPARK_TOPOLOGY_XML is set but empty; unset it to use this machine, or name an hwloc "
          "XML file (lstopo --of xml)");
    }
    options.xml_path = *xml;
  }
  return options;
}

namespace {

// Owns an hwloc topology until load() hands it over.
struct Guard {
  hwloc_topology_t topo = nullptr;
  ~Guard() {
    if (topo != nullptr) hwloc_topology_destroy(topo);
  }
};

void check(int rc, const char* call, const std::string& source) {
  if (rc != 0) {
    throw TopologyError(std::string("hwloc: ") + call + " failed for " + source + ": " +
                        std::strerror(errno));
  }
}

}  // namespace

Topology Topology::load(const LoadOptions& options) {
  Guard guard;
  std::string source = options.xml_path ? options.xml_path->string() : std::string("this machine");
  check(hwloc_topology_init(&guard.topo), "hwloc_topology_init", source);

  // Binding needs PUs, cores, L3 caches and packages. I/O objects come from the XML file when
  // planning for another machine; the live machine's NICs are read from sysfs instead
  // (sysfs_io.hpp), because hwloc's PCI discovery costs ~45 ms for names binding never shows.
  const bool xml_io = options.with_io && options.xml_path.has_value();
  check(hwloc_topology_set_io_types_filter(
            guard.topo, xml_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE),
        "hwloc_topology_set_io_types_filter", source);
  check(hwloc_topology_set_type_filter(guard.topo, HWLOC_OBJ_L1CACHE, HWLOC_TYPE_FILTER_KEEP_NONE),
        "hwloc_topology_set_type_filter", source);
  check(hwloc_topology_set_type_filter(guard.topo, HWLOC_OBJ_L2CACHE, HWLOC_TYPE_FILTER_KEEP_NONE),
        "hwloc_topology_set_type_filter", source);
  check(hwloc_topology_set_icache_types_filter(guard.topo, HWLOC_TYPE_FILTER_KEEP_NONE),
        "hwloc_topology_set_icache_types_filter", source);
  // Components binding does not need: GPU vendor plugins only add names; the x86 backend runs
  // cpuid on every cpu in turn (migrating this thread; several ms on a busy machine) for facts
  // Linux's sysfs already gives (cpukinds included: capacity and frequencies).
  for (const char* component : {"x86", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"}) {
    hwloc_topology_set_components(guard.topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }

  if (!options.xml_path) {
    // Respect the binding sparkrun itself was started with (taskset, srun --cpu-bind, a
    // cgroup): ranks get cpus from that set only.
    check(hwloc_topology_set_flags(guard.topo, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                                   HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING),
          "hwloc_topology_set_flags", source);
  }
  if (options.xml_path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(*options.xml_path, ec)) {
      throw TopologyError("topology file " + source +
                          " does not exist or is not a file; make one with `lstopo --of xml FILE` "
                          "on the machine to plan for");
    }
    if (hwloc_topology_set_xml(guard.topo, source.c_str()) != 0) {
      throw TopologyError("topology file " + source + " is not a readable hwloc XML file (" +
                          std::strerror(errno) + "); make one with `lstopo --of xml FILE`");
    }
  }
  if (hwloc_topology_load(guard.topo) != 0) {
    throw TopologyError("hwloc could not load " + source + ": " + std::strerror(errno) +
                        (options.xml_path ? "; check that it is an hwloc 2.x XML file with "
                                            "complete_cpuset/complete_nodeset on every object"
                                          : ""));
  }

  Topology t;
  t.topo_ = std::exchange(guard.topo, nullptr);
  t.source_ = std::move(source);
  t.with_io_ = options.with_io;
  t.from_xml_ = options.xml_path.has_value();
  t.sysfs_root_ = options.sysfs_root;
  return t;
}

Topology::Topology(Topology&& other) noexcept
    : topo_(std::exchange(other.topo_, nullptr)),
      source_(std::move(other.source_)),
      with_io_(other.with_io_),
      from_xml_(other.from_xml_),
      sysfs_root_(std::move(other.sysfs_root_)) {}

Topology& Topology::operator=(Topology&& other) noexcept {
  if (this != &other) {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
    topo_ = std::exchange(other.topo_, nullptr);
    source_ = std::move(other.source_);
    with_io_ = other.with_io_;
    from_xml_ = other.from_xml_;
    sysfs_root_ = std::move(other.sysfs_root_);
  }
  return *this;
}

Topology::~Topology() {
  if (topo_ != nullptr) hwloc_topology_destroy(topo_);
}

bool Topology::is_this_system() const {
  return topo_ != nullptr && hwloc_topology_is_thissystem(topo_) != 0;
}

}  // namespace spark::topo
