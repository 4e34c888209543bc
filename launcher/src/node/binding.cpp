#include "binding.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include "nccl_env.hpp"
#include "spark/topo/error.hpp"
#include "spark/topo/plan.hpp"
#include "stderr_output.hpp"
#include "usage_error.hpp"

namespace spark::launch {

BindingOptions binding_options(const Options& o) {
  return BindingOptions{o.bind_to, o.map_by, o.topology, o.report_bindings, o.nccl_env};
}

void skip_unneeded_hwloc_plugins() {
  ::setenv("HWLOC_PLUGINS_BLACKLIST",
           "hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml,hwloc_cuda,hwloc_nvml,hwloc_rsmi,"
           "hwloc_levelzero",
           0);
}

namespace {

// -x exports win over sparkrun's own environment, as they do for the ranks.
topo::EnvLookup env_of(const NodeRunSpec& spec) {
  return [&spec](std::string_view name) -> std::optional<std::string> {
    for (const auto& [key, value] : spec.exports) {
      if (key == name) return value;
    }
    for (const auto& entry : spec.base_env) {
      if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
          entry[name.size()] == '=') {
        return entry.substr(name.size() + 1);
      }
    }
    return std::nullopt;
  };
}

}  // namespace

std::string why_no_rdma_lanes(std::string_view transport, std::size_t nodes,
                              bool machine_has_lanes) {
  if (transport == "roce") return "";
  if (transport != "auto") return "SPARK_TRANSPORT=" + std::string(transport);
  if (nodes <= 1) return "one node: its ranks use shared memory";
  if (!machine_has_lanes) return "this machine has no RDMA NIC";
  return "";
}

void plan_node_binding(const BindingOptions& b, NodeRunSpec& spec, std::FILE* err) {
  const NodePlan& node = spec.plan.nodes.at(static_cast<std::size_t>(spec.node));
  try {
    topo::EnvLookup env = env_of(spec);
    topo::PlanOptions options;
    options.local_ranks = static_cast<int>(node.ranks.size());
    if (!b.bind_to.empty()) options.bind_to = topo::parse_bind_to(b.bind_to);
    // "--map-by node" spreads ranks over hosts (job plan); on each node they fill slots.
    if (!b.map_by.empty() && b.map_by != "node") {
      try {
        options.map_by = topo::parse_map_by(b.map_by);
      } catch (const topo::TopologyError&) {
        throw UsageError("--map-by \"" + b.map_by +
                         "\" is not one of: slot, core, l3 (cores on a node), node (ranks over "
                         "hosts)");
      }
    }
    topo::hca_from_env(options, env);

    skip_unneeded_hwloc_plugins();
    topo::LoadOptions load = topo::load_options_from_env(env);
    if (!b.topology.empty()) load.xml_path = b.topology;
    auto topology = std::make_shared<topo::Topology>(topo::Topology::load(load));
    topo::MachineInfo machine = topo::machine_info(*topology);
    // A stale NCCL_IB_HCA must not stop a job that uses no RDMA: the names are resolved (and
    // refused when this machine has none of them) only when the ranks may use RDMA lanes.
    std::string hca_unused;
    // A user's list with half a CX7 port gives NCCL and libspark a tenth of the bandwidth
    // (~3 vs ~24 GB/s busbw), whether or not libspark's ranks use it.
    if (options.hca) {
      if (auto note = one_half_note(machine, options.hca_source, *options.hca))
        std::fprintf(err, "sparkrun: %s\n", host_line("note: " + *note).c_str());
    }
    if (options.hca) {
      const std::string why = why_no_rdma_lanes(env("SPARK_TRANSPORT").value_or("auto"),
                                                spec.plan.nodes.size(), !machine.lanes.empty());
      if (!why.empty()) {
        hca_unused = options.hca_source + "=\"" + *options.hca +
                     "\" not used: no rank of this job uses RDMA lanes (" + why + ")";
        options.hca.reset();
      }
    }
    topo::Plan plan = topo::make_plan(machine, options);
    if (!hca_unused.empty()) plan.notes.push_back(hca_unused);

    // Default policy on an oversubscribed node: do not pin ranks onto shared cores (the
    // scheduler balances better); an explicit --bind-to binds anyway.
    bool shared = false;
    for (const auto& r : plan.ranks) shared = shared || r.shared;
    const bool apply = plan.applies_here && options.bind_to != topo::BindTo::none &&
                       !(shared && b.bind_to.empty());
    if (plan.applies_here && shared && b.bind_to.empty()) {
      // Show what happens: unbound ranks, and why ("... share cores: 3 ranks on 2 cores").
      std::string why;
      for (auto it = plan.notes.begin(); it != plan.notes.end();) {
        if (it->find(" share cores: ") != std::string::npos) {
          why = it->substr(it->find(": ") + 2);
          it = plan.notes.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& r : plan.ranks) {
        r.cpus.clear();
        r.cpuset.clear();
        r.kind = r.l3 = "-";
        r.shared = false;
      }
      plan.notes.push_back("ranks would share cores (" + why +
                           "): left unbound; pass --bind-to to bind anyway");
    }

    if (b.report_bindings) {
      std::string report = topo::format_report(plan, node.host, node.ranks.front());
      // Ranks of a node need not be consecutive: relabel the rank column when they are not.
      if (node.ranks.back() - node.ranks.front() + 1 != static_cast<int>(node.ranks.size())) {
        report.clear();
        for (std::size_t l = 0; l < plan.ranks.size(); ++l) {
          topo::Plan one = plan;
          one.ranks = {plan.ranks[l]};
          one.ranks[0].local_rank = 0;
          one.notes.clear();
          std::string line = topo::format_report(one, node.host, node.ranks[l]);
          report += l == 0 ? line : line.substr(line.find('\n') + 1);
        }
        for (const auto& n : plan.notes) report += "note: " + n + "\n";
      }
      std::string prefixed;
      for (std::size_t pos = 0; pos < report.size();) {
        std::size_t nl = report.find('\n', pos);
        prefixed += "sparkrun: " + report.substr(pos, nl - pos) + "\n";
        pos = nl + 1;
      }
      std::fputs(prefixed.c_str(), err);
    }
    if (!plan.applies_here) {
      std::fprintf(err,
                   "sparkrun: note: binding planned for %s, not this machine; ranks run here "
                   "unbound\n",
                   plan.source.c_str());
    }

    spec.cpusets.assign(plan.ranks.size(), std::nullopt);
    spec.cpuset_text.assign(plan.ranks.size(), std::string());
    spec.lanes.assign(plan.ranks.size(), std::string());
    for (std::size_t l = 0; l < plan.ranks.size(); ++l) {
      const topo::RankBinding& r = plan.ranks[l];
      if (plan.applies_here) {
        for (const auto& lane : r.lanes) spec.lanes[l] += (spec.lanes[l].empty() ? "" : ",") + lane;
      }
      if (!apply) continue;
      cpu_set_t set;
      if (topo::to_cpu_set(r, set)) {
        spec.cpusets[l] = set;
        spec.cpuset_text[l] = r.cpuset;
      }
    }
    if (b.nccl_env) {
      spec.nccl_env.assign(plan.ranks.size(), {});
      std::vector<std::string> said;
      for (std::size_t l = 0; l < plan.ranks.size(); ++l) {
        // Lanes of another machine (--topology FILE) name no device here.
        NcclEnv e = plan.applies_here
                        ? nccl_env(machine.lanes, plan.ranks[l].lanes, spec.control_interface)
                        : nccl_env({}, {}, spec.control_interface);
        if (!plan.applies_here) {
          e.notes = {"--nccl-env: lanes planned for " + plan.source +
                     ", not this machine: NCCL_IB_HCA and NCCL_IB_GID_INDEX not set (`sparkrun "
                     "topo --topology FILE --nccl-env` shows that machine's lines)"};
        }
        for (const auto& n : e.notes) {
          if (std::find(said.begin(), said.end(), n) != said.end()) continue;
          said.push_back(n);
          std::fprintf(err, "sparkrun: %s\n", host_line("note: " + n).c_str());
        }
        spec.nccl_env[l] = std::move(e.vars);
      }
    }
    bool any = false;
    for (const auto& c : spec.cpusets) any = any || c.has_value();
    if (!any) spec.cpusets.clear();  // the node runner treats an empty vector as "unbound"
    // The live machine's topology goes on to the PMIx server (one hwloc load per launch);
    // an XML topology describes another machine and must not.
    if (topology->is_this_system() && !topology->from_xml()) {
      spec.hwloc_topology = topology->get();
      spec.topology_owner = topology;
    }
  } catch (const topo::TopologyError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace spark::launch
