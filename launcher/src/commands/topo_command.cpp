#include "topo_command.hpp"

#include <net/if.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "binding.hpp"
#include "nccl_env.hpp"
#include "options.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"
#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {

namespace {

topo::EnvLookup env_lookup() {
  return [](std::string_view name) {
    const char* v = std::getenv(std::string(name).c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
}

constexpr const char* kTopoUsage =
    "usage: sparkrun topo [--topology FILE] [--nccl-env [-n N] [--control-net IFACE]\n"
    "                     [--ib-sysfs DIR]]\n"
    "Shows the machine as sparkrun's binding sees it: core kinds and which source decided\n"
    "them (hwloc cpukinds, Arm MIDR part number, sysfs cpu_capacity), the fast cores, the L3\n"
    "clusters, the NIC lanes (PCI vendor 0x15b3) with their PCIe link, and GPUs.\n"
    "  --topology FILE     describe this hwloc XML (lstopo --of xml) instead of this machine;\n"
    "                      SPARK_TOPOLOGY_XML does the same\n"
    "  --nccl-env          print instead the NAME=value lines `sparkrun --nccl-env` gives a\n"
    "                      rank here: NCCL_IB_HCA (both PCIe halves of its lanes),\n"
    "                      NCCL_IB_GID_INDEX (the IPv4 RoCE v2 GID), NCCL_SOCKET_IFNAME and\n"
    "                      GLOO_SOCKET_IFNAME; notes on stderr (docs/roce.md)\n"
    "  -n N                lines for N local ranks (default 1; ranks alternate CX7 ports)\n"
    "  --control-net IFACE the interface for the socket variables (default: the interface\n"
    "                      of the IPv4 default route, else lo)\n"
    "  --ib-sysfs DIR      read GID tables under DIR (default /sys/class/infiniband)\n";

// `sparkrun topo --nccl-env`: the lines for `ranks` local ranks of a job here.
std::string nccl_lines(const topo::Topology& topology, int ranks, std::string control,
                       const std::string& ib_root) {
  const topo::MachineInfo machine = topo::machine_info(topology);
  topo::PlanOptions options;
  options.local_ranks = ranks;
  options.bind_to = topo::BindTo::none;  // lanes only
  topo::hca_from_env(options, env_lookup());
  const topo::Plan plan = topo::make_plan(machine, options);
  if (options.hca) {
    if (auto note = one_half_note(machine, options.hca_source, *options.hca))
      std::fprintf(stderr, "sparkrun: note: %s\n", note->c_str());
  }
  if (control.empty()) control = default_route_interface();
  if (control.empty()) control = "lo";
  std::string out;
  std::vector<std::string> said;
  for (const auto& r : plan.ranks) {
    NcclEnv e = nccl_env(machine.lanes, r.lanes, control, ib_root);
    if (ranks > 1) out += "# local rank " + std::to_string(r.local_rank) + "\n";
    for (const auto& [name, value] : e.vars) out += name + "=" + value + "\n";
    for (const auto& n : e.notes) {
      if (std::find(said.begin(), said.end(), n) != said.end()) continue;
      said.push_back(n);
      std::fprintf(stderr, "sparkrun: note: %s\n", n.c_str());
    }
  }
  return out;
}

}  // namespace

int topo_main(int argc, char** argv) {
  CLI::App app{"sparkrun topo", "sparkrun topo"};
  app.set_help_flag();  // kTopoUsage is the help
  bool help = false;
  bool nccl = false;
  std::string file, control, ib_root(kIbSysfsRoot), ranks_text = "1";
  app.add_flag("-h,--help", help);
  app.add_option("--topology", file);
  app.add_flag("--nccl-env", nccl);
  app.add_option("-n", ranks_text);
  app.add_option("--control-net", control);
  app.add_option("--ib-sysfs", ib_root);
  try {
    parse_command_line(app, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun topo");
  }
  if (help) {
    std::fputs(kTopoUsage, stdout);
    return 0;
  }
  int ranks = 1;
  try {
    if (!nccl && (app.count("-n") + app.count("--control-net") + app.count("--ib-sysfs")) > 0)
      throw UsageError("-n, --control-net and --ib-sysfs go with --nccl-env");
    ranks = parse_int(ranks_text, 1, 1024, "-n");
    if (app.count("--control-net") > 0 && control.empty())
      throw UsageError("--control-net needs an interface name");
    if (app.count("--ib-sysfs") > 0 && ib_root.empty())
      throw UsageError("--ib-sysfs needs a directory");
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun topo");
  }
  try {
    skip_unneeded_hwloc_plugins();
    topo::LoadOptions load = topo::load_options_from_env(env_lookup());
    if (app.count("--topology") > 0) {
      if (file.empty()) throw topo::TopologyError("--topology needs a file name");
      load.xml_path = file;
    }
    const topo::Topology topology = topo::Topology::load(load);
    if (nccl) {
      // An interface named for this machine must exist here (an XML machine's need not).
      if (!control.empty() && !load.xml_path && ::if_nametoindex(control.c_str()) == 0)
        throw topo::TopologyError("--control-net " + control + ": no such interface here");
      std::fputs(nccl_lines(topology, ranks, control, ib_root).c_str(), stdout);
      return 0;
    }
    std::fputs(topo::describe(topology).c_str(), stdout);
    return 0;
  } catch (const topo::TopologyError& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return kExitUsage;
  }
}

}  // namespace spark::launch
