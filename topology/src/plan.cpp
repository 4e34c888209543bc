// The binding plan: cores from the fastest kind near the rank's NIC, best L3 cluster first.
#include "spark/topo/plan.hpp"

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>

#include "lanes.hpp"
#include "spark/topo/cpulist.hpp"
#include "spark/topo/error.hpp"

namespace spark::topo {

BindTo parse_bind_to(std::string_view text) {
  if (text == "fast") return BindTo::fast;
  if (text == "core") return BindTo::core;
  if (text == "l3") return BindTo::l3;
  if (text == "none") return BindTo::none;
  throw TopologyError("--bind-to \"" + std::string(text) +
                      "\" is not one of: fast, core, l3, none");
}

MapBy parse_map_by(std::string_view text) {
  if (text == "slot") return MapBy::slot;
  if (text == "core") return MapBy::core;
  if (text == "l3") return MapBy::l3;
  throw TopologyError("--map-by \"" + std::string(text) + "\" is not one of: slot, core, l3");
}

std::string_view to_string(BindTo b) {
  switch (b) {
    case BindTo::fast:
      return "fast";
    case BindTo::core:
      return "core";
    case BindTo::l3:
      return "l3";
    case BindTo::none:
      return "none";
  }
  return "?";
}

std::string_view to_string(MapBy m) {
  switch (m) {
    case MapBy::slot:
      return "slot";
    case MapBy::core:
      return "core";
    case MapBy::l3:
      return "l3";
  }
  return "?";
}

void hca_from_env(PlanOptions& options, const EnvLookup& env) {
  for (const char* name : {"SPARK_IB_HCA", "NCCL_IB_HCA"}) {
    if (auto value = env(name)) {
      options.hca = *value;
      options.hca_source = name;
      return;
    }
  }
}

std::string format_size(std::uint64_t bytes) {
  if (bytes != 0 && bytes % (1024 * 1024) == 0) return std::to_string(bytes >> 20) + "MB";
  if (bytes != 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KB";
  return std::to_string(bytes) + "B";
}

namespace {

// Cores that binding may use: the requested cpu list, near the chosen lanes when possible.
std::vector<Core> candidate_cores(const MachineInfo& m, const PlanOptions& o,
                                  const std::vector<std::size_t>& pool, Plan& plan) {
  std::vector<Core> cores = m.cores;
  if (o.cpu_list) {
    std::vector<int> wanted = parse_cpu_list(*o.cpu_list, "cpu list");
    std::vector<int> missing;
    std::set_difference(wanted.begin(), wanted.end(), m.cpus.begin(), m.cpus.end(),
                        std::back_inserter(missing));
    if (!missing.empty()) {
      throw TopologyError(
          "cpu list \"" + *o.cpu_list + "\" names cpus " + format_cpu_list(missing) + " that " +
          m.source + " does not have or does not allow (usable cpus: " + format_cpu_list(m.cpus) +
          ")");
    }
    std::set<int> keep(wanted.begin(), wanted.end());
    std::vector<Core> kept;
    for (Core c : cores) {
      std::erase_if(c.cpus, [&](int cpu) { return keep.count(cpu) == 0; });
      if (!c.cpus.empty()) kept.push_back(std::move(c));
    }
    cores = std::move(kept);
    plan.notes.push_back("restricted to cpus " + format_cpu_list(wanted));
  }

  std::set<int> near;
  std::vector<std::string> names;
  for (std::size_t i : pool) {
    near.insert(m.lanes[i].near_cpus.begin(), m.lanes[i].near_cpus.end());
    names.push_back(m.lanes[i].name);
  }
  if (!near.empty()) {
    std::vector<Core> close;
    for (const Core& c : cores) {
      if (std::all_of(c.cpus.begin(), c.cpus.end(), [&](int cpu) { return near.count(cpu); })) {
        close.push_back(c);
      }
    }
    if (close.empty()) {
      plan.notes.push_back("no usable core is near the NIC (cpus " +
                           format_cpu_list({near.begin(), near.end()}) + "); binding away from it");
    } else if (close.size() < cores.size()) {
      std::vector<int> cpus;
      for (const Core& c : close) cpus.insert(cpus.end(), c.cpus.begin(), c.cpus.end());
      plan.notes.push_back("NIC-local cores: " + format_cpu_list(cpus) + " (near " + names.front() +
                           (names.size() > 1 ? " and others" : "") + ")");
      cores = std::move(close);
    }
  }
  return cores;
}

struct Group {
  int cluster = -1;
  std::vector<Core> cores;
  std::vector<int> ranks;
};

}  // namespace

Plan make_plan(const MachineInfo& m, const PlanOptions& o) {
  if (o.local_ranks < 1) {
    throw TopologyError("cannot plan for " + std::to_string(o.local_ranks) +
                        " local ranks; need at least 1");
  }
  Plan plan;
  plan.source = m.source;
  plan.applies_here = m.this_system;
  plan.bind_to = o.bind_to;
  plan.map_by = o.map_by;

  // Lanes.
  std::vector<std::size_t> pool;
  if (o.hca) {
    if (!m.io_probed) {
      throw TopologyError(o.hca_source +
                          " is set but the topology was loaded without I/O "
                          "discovery; load it with NICs (LoadOptions::with_io)");
    }
    pool = detail::select_lanes(m.lanes, *o.hca, o.hca_source);
  } else {
    for (std::size_t i = 0; i < m.lanes.size(); ++i) pool.push_back(i);
  }
  if (m.lanes.empty()) {
    plan.notes.push_back(m.io_probed ? "no NIC found, binding by core speed only"
                                     : "NICs not probed, binding by core speed only");
  }

  std::vector<Core> cores = candidate_cores(m, o, pool, plan);
  if (cores.empty()) throw TopologyError("no usable cores to bind to on " + m.source);

  auto lanes_for = [&](int rank) {
    if (o.hca) {
      std::vector<std::string> all;
      for (std::size_t i : pool) all.push_back(m.lanes[i].name);
      return all;
    }
    return detail::auto_lanes(m.lanes, pool, rank);
  };

  plan.ranks.resize(static_cast<std::size_t>(o.local_ranks));
  for (int r = 0; r < o.local_ranks; ++r) {
    plan.ranks[r].local_rank = r;
    plan.ranks[r].lanes = lanes_for(r);
    plan.ranks[r].kind = "-";
    plan.ranks[r].l3 = "-";
  }
  if (o.bind_to == BindTo::none) {
    plan.notes.push_back("not bound (--bind-to none)");
    return plan;
  }

  // Units of placement, in ranked order: fast = the best kind's cores per L3 cluster;
  // core = every core, per kind and cluster; l3 = every core, per cluster.
  if (o.bind_to == BindTo::fast) {
    const int best = cores.front().kind;  // cores are ranked: front is the fastest available
    std::erase_if(cores, [&](const Core& c) { return c.kind != best; });
  }
  std::vector<Group> groups;
  std::map<std::pair<int, int>, std::size_t> group_of;
  for (const Core& c : cores) {
    // Spreading over L3s (map-by l3, bind-to l3) groups by cluster only: a cluster's cores stay
    // in ranked order, so its fast cores are still used before its slow ones.
    const bool by_cluster = o.bind_to == BindTo::l3 || o.map_by == MapBy::l3;
    auto key = std::make_pair(by_cluster ? 0 : c.kind, c.cluster);
    auto [it, inserted] = group_of.try_emplace(key, groups.size());
    if (inserted) groups.push_back(Group{c.cluster, {}, {}});
    groups[it->second].cores.push_back(c);
  }

  // Placement: a group takes as many ranks as it has cores (one rank per L3 for bind-to l3);
  // slot/core fill groups in order, l3 deals ranks round-robin; extra ranks wrap around.
  auto capacity = [&](const Group& g) {
    return o.bind_to == BindTo::l3 ? std::size_t{1} : g.cores.size();
  };
  std::size_t total = 0;
  for (const auto& g : groups) total += capacity(g);
  std::size_t next_rr = 0;
  for (int r = 0; r < o.local_ranks; ++r) {
    std::size_t chosen = groups.size();
    if (static_cast<std::size_t>(r) < total) {
      if (o.map_by == MapBy::l3) {
        for (std::size_t step = 0; step < groups.size(); ++step) {
          std::size_t g = (next_rr + step) % groups.size();
          if (groups[g].ranks.size() < capacity(groups[g])) {
            chosen = g;
            next_rr = g + 1;
            break;
          }
        }
      } else {
        for (std::size_t g = 0; g < groups.size(); ++g) {
          if (groups[g].ranks.size() < capacity(groups[g])) {
            chosen = g;
            break;
          }
        }
      }
    } else {
      chosen = (static_cast<std::size_t>(r) - total) % groups.size();
    }
    groups[chosen].ranks.push_back(r);
  }

  // Binding inside a group.
  for (const Group& g : groups) {
    const std::size_t n = g.ranks.size(), k = g.cores.size();
    std::size_t offset = 0;
    for (std::size_t i = 0; i < n; ++i) {
      RankBinding& rb = plan.ranks[g.ranks[i]];
      std::vector<const Core*> mine;
      if (o.bind_to == BindTo::l3) {
        for (const Core& c : g.cores) mine.push_back(&c);
      } else if (o.bind_to == BindTo::fast && o.map_by != MapBy::core && n <= k) {
        std::size_t size = k / n + (i < k % n ? 1 : 0);  // contiguous blocks, first ones larger
        for (std::size_t j = 0; j < size; ++j) mine.push_back(&g.cores[offset + j]);
        offset += size;
      } else {
        mine.push_back(&g.cores[i % k]);
      }
      std::set<std::string> kinds;
      for (const Core* c : mine) {
        rb.cpus.insert(rb.cpus.end(), c->cpus.begin(), c->cpus.end());
        kinds.insert(m.kinds[c->kind].name);
      }
      std::sort(rb.cpus.begin(), rb.cpus.end());
      rb.cpuset = format_cpu_list(rb.cpus);
      rb.kind.clear();
      for (const auto& kname : kinds) rb.kind += (rb.kind.empty() ? "" : "+") + kname;
      if (g.cluster >= 0) {
        const Cluster& cl = m.clusters[g.cluster];
        rb.l3 = cl.name + " " + format_size(cl.size_bytes);
      }
    }
  }

  // Sharing.
  std::vector<int> sharing;
  for (auto& a : plan.ranks) {
    for (const auto& b : plan.ranks) {
      if (a.local_rank == b.local_rank) continue;
      std::vector<int> both;
      std::set_intersection(a.cpus.begin(), a.cpus.end(), b.cpus.begin(), b.cpus.end(),
                            std::back_inserter(both));
      if (!both.empty()) a.shared = true;
    }
    if (a.shared) sharing.push_back(a.local_rank);
  }
  if (!sharing.empty()) {
    const bool kinds_differ = m.kinds.size() > 1;
    std::string what = o.bind_to == BindTo::l3 ? "L3 clusters"
                       : o.bind_to == BindTo::fast && kinds_differ
                           ? "fast (" + m.kinds[cores.front().kind].name + ") cores"
                           : "cores";
    std::string list;
    for (int r : sharing) list += (list.empty() ? "" : ",") + std::to_string(r);
    plan.notes.push_back("ranks " + list + " share cores: " + std::to_string(o.local_ranks) +
                         " ranks on " + std::to_string(total) + " " + what +
                         (o.bind_to == BindTo::fast && kinds_differ
                              ? "; --bind-to core also uses the slower cores"
                              : ""));
  }
  return plan;
}

bool to_cpu_set(const RankBinding& rank, cpu_set_t& out) {
  CPU_ZERO(&out);
  if (rank.cpus.empty()) return false;
  for (int cpu : rank.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      throw TopologyError("cpu " + std::to_string(cpu) + " is beyond CPU_SETSIZE (" +
                          std::to_string(CPU_SETSIZE) + "); cannot bind to it");
    }
    CPU_SET(cpu, &out);
  }
  return true;
}

int apply_cpu_set(const cpu_set_t& set) noexcept {
  return sched_setaffinity(0, sizeof(cpu_set_t), &set) == 0 ? 0 : errno;
}

}  // namespace spark::topo
