#include "job_plan.hpp"

#include "usage_error.hpp"

namespace spark::launch {

bool is_this_machine(const std::string& host, const std::string& hostname) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  if (host == hostname) return true;
  auto short_name = [](const std::string& s) { return s.substr(0, s.find('.')); };
  return !hostname.empty() && short_name(host) == short_name(hostname);
}

JobPlan make_job_plan(const PlanInput& in) {
  JobPlan plan;
  std::vector<HostSlots> hosts = merge_hosts(in.hosts);
  const bool host_list = !hosts.empty();
  if (!host_list) {
    hosts.push_back({in.local_name.empty() ? "localhost" : in.local_name, in.local_cpus, false});
  }
  if (in.per_node) {
    for (auto& h : hosts) h.slots = *in.per_node;
  }
  int total_slots = 0;
  for (const auto& h : hosts) total_slots += h.slots;
  const int np = in.np.value_or(total_slots);
  plan.size = np;
  if (in.per_node && np > total_slots) {
    throw UsageError("-n " + std::to_string(np) + " is more than -N " +
                     std::to_string(*in.per_node) + " ranks on each of " +
                     std::to_string(hosts.size()) + " host(s); raise -N or add hosts");
  }

  if (host_list && np > total_slots && !in.oversubscribe) {
    throw UsageError("-n " + std::to_string(np) + " needs more slots than the " +
                     std::to_string(total_slots) +
                     " given by --host/--hostfile; add slots (host:N) or --oversubscribe");
  }

  // Which listed hosts are this machine: two names for this machine would make two
  // "nodes" share one PMIx server, which sparkrun does not model.
  int local_seen = -1;
  for (size_t i = 0; i < hosts.size(); ++i) {
    bool local = !host_list || (in.is_local ? in.is_local(hosts[i].name) : false);
    if (local) {
      if (local_seen >= 0) {
        throw UsageError("hosts '" + hosts[local_seen].name + "' and '" + hosts[i].name +
                         "' are both this machine; list it once with all its slots");
      }
      local_seen = static_cast<int>(i);
    }
  }

  // Fill slots in host order (by slot) or one rank per host in turn (by node); past the
  // slots (oversubscribe / no host list) go round-robin.
  std::vector<std::vector<int>> per_host(hosts.size());
  int rank = 0;
  if (in.map_by_node) {
    for (bool placed = true; placed && rank < np;) {
      placed = false;
      for (size_t i = 0; i < hosts.size() && rank < np; ++i) {
        if (static_cast<int>(per_host[i].size()) < hosts[i].slots) {
          per_host[i].push_back(rank++);
          placed = true;
        }
      }
    }
  }
  for (size_t i = 0; i < hosts.size() && rank < np; ++i) {
    for (int s = static_cast<int>(per_host[i].size()); s < hosts[i].slots && rank < np; ++s) {
      per_host[i].push_back(rank++);
    }
  }
  for (size_t i = 0; rank < np; i = (i + 1) % hosts.size()) per_host[i].push_back(rank++);

  plan.ranks.resize(static_cast<size_t>(np));
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (per_host[i].empty()) continue;
    NodePlan node;
    node.host = hosts[i].name;
    node.local = !host_list || static_cast<int>(i) == local_seen;
    node.slots = hosts[i].slots;
    node.ranks = per_host[i];
    const int node_index = static_cast<int>(plan.nodes.size());
    for (size_t l = 0; l < node.ranks.size(); ++l) {
      plan.ranks[static_cast<size_t>(node.ranks[l])] = {node.ranks[l], node_index,
                                                        static_cast<int>(l)};
    }
    if (static_cast<int>(node.ranks.size()) > in.local_cpus && node.local) {
      plan.notes.push_back(std::to_string(node.ranks.size()) + " ranks on " + node.host +
                           " share its " + std::to_string(in.local_cpus) + " cpus");
    }
    plan.nodes.push_back(std::move(node));
  }
  return plan;
}

}  // namespace spark::launch
