// The topology cache (LoadOptions::cache_file): a cached load is the discovered topology, still
// this system (binding binds), and a changed machine (boot id, online CPUs, binding) or a file
// that is not trustworthy gives a fresh discovery.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "spark/topo/topology.hpp"

namespace spark::topo {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "spark-topo-cache.XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

// The objects, their sets and infos, and the cpukinds with their efficiency ranks (the XML
// leaves out <support> lines: an imported topology reports the discovery features it
// imported, not the ones it ran).
std::string exported(const Topology& t) {
  char* xml = nullptr;
  int len = 0;
  EXPECT_EQ(hwloc_topology_export_xmlbuffer(t.get(), &xml, &len, 0), 0);
  std::istringstream lines(std::string(xml, static_cast<std::size_t>(len)));
  hwloc_free_xmlbuffer(t.get(), xml);
  std::string s, line;
  while (std::getline(lines, line))
    if (line.find("<support ") == std::string::npos) s += line + "\n";
  const int kinds = hwloc_cpukinds_get_nr(t.get(), 0);
  for (int k = 0; k < kinds; ++k) {
    int efficiency = -2;
    hwloc_cpukinds_get_info(t.get(), static_cast<unsigned>(k), nullptr, &efficiency, nullptr,
                            nullptr, 0);
    s += "kind " + std::to_string(k) + " efficiency " + std::to_string(efficiency) + "\n";
  }
  return s;
}

LoadOptions cached(const fs::path& file, const std::string& key) {
  LoadOptions o;
  o.cache_file = file;
  o.cache_key = key;
  return o;
}

TEST(TopologyCache, ReloadsTheDiscoveredTopologyUntilTheMachineChanges) {
  TempDir dir;
  const fs::path file = dir.path / "topology.xml";
  const Topology fresh = Topology::load(cached(file, "boot-a online=0-1"));
  EXPECT_FALSE(fresh.from_cache());
  ASSERT_TRUE(fs::is_regular_file(file));
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  const Topology again = Topology::load(cached(file, "boot-a online=0-1"));
  EXPECT_TRUE(again.from_cache());
  EXPECT_TRUE(again.is_this_system());  // binding calls bind, as on a discovered one
  EXPECT_FALSE(again.from_xml());       // the live machine: goes on to PMIx, plans apply
  EXPECT_EQ(exported(again), exported(fresh));
  EXPECT_EQ(hwloc_get_nbobjs_by_type(again.get(), HWLOC_OBJ_PU),
            hwloc_get_nbobjs_by_type(fresh.get(), HWLOC_OBJ_PU));

  // Another boot (or CPUs going on/offline, another binding: all in the key) discovers anew
  // and replaces the file, which the old key then no longer matches.
  EXPECT_FALSE(Topology::load(cached(file, "boot-b online=0-1")).from_cache());
  EXPECT_TRUE(Topology::load(cached(file, "boot-b online=0-1")).from_cache());
  EXPECT_FALSE(Topology::load(cached(file, "boot-a online=0-1")).from_cache());

  // A file others may write is not trusted; a damaged one is discovery, never an error.
  fs::permissions(file, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(Topology::load(cached(file, "boot-a online=0-1")).from_cache());
  std::ofstream(file) << "spark-topology-cache/1 boot-c\n<topology>garbage";
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
  const Topology after_damage = Topology::load(cached(file, "boot-c"));
  EXPECT_FALSE(after_damage.from_cache());
  EXPECT_EQ(exported(after_damage), exported(fresh));
  EXPECT_TRUE(Topology::load(cached(file, "boot-c")).from_cache());
  // No temporary files left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);
}

TEST(TopologyCache, MachineKeyFollowsBootIdAndBinding) {
  TempDir dir;
  auto root_with_boot_id = [&](const std::string& name, const std::string& id) {
    const fs::path root = dir.path / name;
    fs::create_directories(root / "proc/sys/kernel/random");
    fs::create_directories(root / "sys/devices/system/cpu");
    std::ofstream(root / "proc/sys/kernel/random/boot_id") << id << "\n";
    std::ofstream(root / "sys/devices/system/cpu/online") << "0-1\n";
    return root;
  };
  const fs::path a = root_with_boot_id("a", "11111111-aaaa");
  const fs::path b = root_with_boot_id("b", "22222222-bbbb");
  EXPECT_EQ(machine_key(a), machine_key(a));
  EXPECT_NE(machine_key(a), machine_key(b));
  EXPECT_EQ(machine_key(a).find('\n'), std::string::npos);

  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "bound to one CPU: no other binding to try";
  const std::string before = machine_key(a);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const std::string bound = machine_key(a);
  ASSERT_EQ(sched_setaffinity(0, sizeof mine, &mine), 0);
  EXPECT_NE(bound, before);
}

TEST(TopologyCache, EnvironmentNamesTheFileOrTurnsItOff) {
  auto options = [](std::map<std::string, std::string> vars) {
    return load_options_from_env([vars](std::string_view name) -> std::optional<std::string> {
      auto it = vars.find(std::string(name));
      if (it == vars.end()) return std::nullopt;
      return it->second;
    });
  };
  EXPECT_FALSE(options({{"SPARK_TOPOLOGY_CACHE", "0"}}).cache_file.has_value());
  EXPECT_EQ(options({{"SPARK_TOPOLOGY_CACHE", "/x/t.xml"}}).cache_file, fs::path("/x/t.xml"));
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  const std::string name = "sparkrun/topology-" + std::string(host) + ".xml";
  EXPECT_EQ(options({{"XDG_CACHE_HOME", "/c"}, {"HOME", "/h"}}).cache_file, fs::path("/c") / name);
  EXPECT_EQ(options({{"HOME", "/h"}}).cache_file, fs::path("/h/.cache") / name);
  EXPECT_FALSE(options({}).cache_file.has_value());
}

}  // namespace
}  // namespace spark::topo
