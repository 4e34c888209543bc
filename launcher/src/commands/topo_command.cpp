#include "topo_command.hpp"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "binding.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"

namespace spark::launch {

namespace {

constexpr const char* kUsage =
    "usage: sparkrun topo [--topology FILE]\n"
    "Shows the machine as sparkrun's binding sees it: core kinds and which source decided\n"
    "them (hwloc cpukinds, Arm MIDR part number, sysfs cpu_capacity), the fast cores, the L3\n"
    "clusters, the NIC lanes (PCI vendor 0x15b3) with their PCIe link, and GPUs.\n"
    "  --topology FILE   describe this hwloc XML (lstopo --of xml) instead of this machine;\n"
    "                    SPARK_TOPOLOGY_XML does the same\n";

}  // namespace

int topo_main(int argc, char** argv) {
  std::optional<std::string> file;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--topology" && i + 1 < argc) {
      file = argv[++i];
    } else if (arg.rfind("--topology=", 0) == 0) {
      file = std::string(arg.substr(11));
    } else {
      std::fprintf(stderr, "sparkrun topo: error: unexpected argument \"%s\"\n%s", argv[i], kUsage);
      return 2;
    }
  }
  try {
    skip_unneeded_hwloc_plugins();
    topo::LoadOptions load = topo::load_options_from_env([](std::string_view name) {
      const char* v = std::getenv(std::string(name).c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    });
    if (file) {
      if (file->empty()) throw topo::TopologyError("--topology needs a file name");
      load.xml_path = *file;
    }
    std::fputs(topo::describe(topo::Topology::load(load)).c_str(), stdout);
    return 0;
  } catch (const topo::TopologyError& e) {
    std::fprintf(stderr, "sparkrun topo: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace spark::launch
