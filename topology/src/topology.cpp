#include "spark/topo/topology.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <utility>

#include "spark/topo/error.hpp"
#include "topology_cache.hpp"

extern char** environ;

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
  const auto cache = env("SPARK_TOPOLOGY_CACHE");
  if (cache && *cache == "0") return options;
  if (cache && !cache->empty()) {
    options.cache_file = *cache;
    return options;
  }
  // A user's cache, per host (a home directory shared by a cluster's hosts keeps one file
  // for each).
  std::filesystem::path dir;
  if (auto xdg = env("XDG_CACHE_HOME"); xdg && !xdg->empty()) {
    dir = *xdg;
  } else if (auto home = env("HOME"); home && !home->empty()) {
    dir = std::filesystem::path(*home) / ".cache";
  } else {
    return options;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return options;
  options.cache_file = dir / "sparkrun" / ("topology-" + std::string(host) + ".xml");
  return options;
}

std::string machine_key(const std::filesystem::path& sysfs_root) {
  auto first_line = [&](const char* path) {
    std::ifstream in(sysfs_root / path);
    std::string line;
    std::getline(in, line);
    return line;
  };
  std::string key = first_line("proc/sys/kernel/random/boot_id") +
                    " online=" + first_line("sys/devices/system/cpu/online") + " bound=";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) key += std::to_string(c) + ",";
  }
  key += " hwloc=" + std::to_string(hwloc_get_api_version());
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "HWLOC_", 6) == 0) key += std::string(" ") + *e;
  // One line in the cache file.
  for (char& c : key)
    if (c == '\n') c = ' ';
  return key;
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
  // The live machine from the cache: the same filters and flags, so the same objects.
  std::string cache_key;
  bool from_cache = false;
  std::optional<std::string> cached;
  if (!options.xml_path && options.cache_file) {
    cache_key = options.cache_key.empty() ? machine_key(options.sysfs_root) : options.cache_key;
    cached = cache::read(*options.cache_file, cache_key);
    from_cache = cached && hwloc_topology_set_xmlbuffer(guard.topo, cached->data(),
                                                        static_cast<int>(cached->size() + 1)) ==
                               0;  // with the NUL
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
  if (from_cache && hwloc_topology_load(guard.topo) != 0) {
    // A cache hwloc refuses (a damaged file that its XML reader took at first: hwloc's own
    // minimal reader, as in the arm64 build, fails only here): discover, as without one, and
    // replace the file.
    Topology t =
        load(LoadOptions{options.xml_path, options.with_io, options.sysfs_root, std::nullopt, {}});
    cache::write(*options.cache_file, cache_key, t.topo_);
    return t;
  }
  if (!from_cache && hwloc_topology_load(guard.topo) != 0) {
    throw TopologyError("hwloc could not load " + source + ": " + std::strerror(errno) +
                        (options.xml_path ? "; check that it is an hwloc 2.x XML file with "
                                            "complete_cpuset/complete_nodeset on every object"
                                          : ""));
  }

  if (!options.xml_path && options.cache_file && !from_cache)
    cache::write(*options.cache_file, cache_key, guard.topo);

  Topology t;
  t.from_cache_ = from_cache;
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
      from_cache_(other.from_cache_),
      sysfs_root_(std::move(other.sysfs_root_)) {}

Topology& Topology::operator=(Topology&& other) noexcept {
  if (this != &other) {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
    topo_ = std::exchange(other.topo_, nullptr);
    source_ = std::move(other.source_);
    with_io_ = other.with_io_;
    from_xml_ = other.from_xml_;
    from_cache_ = other.from_cache_;
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
