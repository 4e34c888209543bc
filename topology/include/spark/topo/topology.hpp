// RAII wrapper over an hwloc topology: the live machine, or an XML file describing another one.
#pragma once

#include <hwloc.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace spark::topo {

/// What to load. The caller fills it (from its command line and environment); the library
/// itself never reads the environment.
struct LoadOptions {
  /// An hwloc XML file (`sparkrun --topology FILE`, SPARK_TOPOLOGY_XML). Empty: the live machine.
  std::optional<std::filesystem::path> xml_path;
  /// Discover PCI devices and their OS devices (NICs, GPUs). Off, hwloc skips all I/O
  /// discovery, which is most of the cost of a live load.
  bool with_io = true;
  /// Root of /proc and /sys for the live machine's MIDR, cpu_capacity and cpufreq readings
  /// (tests point it at a fake tree). Not used for XML topologies: those carry the same facts
  /// as object infos.
  std::filesystem::path sysfs_root = "/";
  /// The live machine's topology kept as XML in this file between loads and parsed instead of
  /// discovered (~0.1 ms instead of ~1 ms) while `cache_key` is the one it was made under.
  /// Unset: discovery every time. Not used for XML topologies.
  std::optional<std::filesystem::path> cache_file;
  /// What a cached topology must have been made under. Empty: machine_key(sysfs_root).
  std::string cache_key;
};

/// This machine as a cached topology must match it: the boot id (a reboot, a new kernel),
/// the online CPUs, this process's CPU binding (a topology is restricted to it), the hwloc
/// version and the HWLOC_* variables that steer hwloc's discovery.
std::string machine_key(const std::filesystem::path& sysfs_root = "/");

/// Looks up an environment variable; nullopt when unset. Lets callers (and tests) decide
/// where the environment comes from.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

/// LoadOptions from SPARK_TOPOLOGY_XML (an empty value is an error, not "unset") and
/// SPARK_TOPOLOGY_CACHE (a file; "0": no cache; unset: sparkrun/topology-HOST.xml in
/// XDG_CACHE_HOME, else in ~/.cache; neither set: no cache).
LoadOptions load_options_from_env(const EnvLookup& env);

class Topology {
 public:
  /// Loads; throws TopologyError naming the file or the hwloc call that failed.
  static Topology load(const LoadOptions& options);

  Topology(Topology&& other) noexcept;
  Topology& operator=(Topology&& other) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  /// True when binding calls would really bind this process (the live machine). An XML
  /// topology describes another machine: plans from it are for display, not for applying.
  bool is_this_system() const;
  /// "this machine" or the XML path.
  const std::string& source() const { return source_; }
  bool has_io() const { return with_io_; }
  bool from_xml() const { return from_xml_; }
  /// The live machine, parsed from LoadOptions::cache_file rather than discovered.
  bool from_cache() const { return from_cache_; }
  const std::filesystem::path& sysfs_root() const { return sysfs_root_; }

  hwloc_topology_t get() const { return topo_; }

 private:
  Topology() = default;
  hwloc_topology_t topo_ = nullptr;
  std::string source_;
  bool with_io_ = false;
  bool from_xml_ = false;
  bool from_cache_ = false;
  std::filesystem::path sysfs_root_;
};

}  // namespace spark::topo
