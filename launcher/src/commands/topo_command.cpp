#include "topo_command.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "binding.hpp"
#include "options.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"
#include "usage_error.hpp"

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
  CLI::App app{"sparkrun topo", "sparkrun topo"};
  app.set_help_flag();  // kUsage is the help
  bool help = false;
  std::string file;
  app.add_flag("-h,--help", help);
  app.add_option("--topology", file);
  try {
    parse_command_line(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun topo");
  }
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  try {
    skip_unneeded_hwloc_plugins();
    topo::LoadOptions load = topo::load_options_from_env([](std::string_view name) {
      const char* v = std::getenv(std::string(name).c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    });
    if (app.count("--topology") > 0) {
      if (file.empty()) throw topo::TopologyError("--topology needs a file name");
      load.xml_path = file;
    }
    std::fputs(topo::describe(topo::Topology::load(load)).c_str(), stdout);
    return 0;
  } catch (const topo::TopologyError& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return kExitUsage;
  }
}

}  // namespace spark::launch
