#include "fabric/roce_lanes.hpp"

#include <algorithm>
#include <set>

#include "fabric/local_lanes.hpp"

namespace spark::fabric {

namespace {

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string name_of(const std::vector<std::string>& names, int n) {
  return n >= 0 && n < static_cast<int>(names.size()) ? names[static_cast<std::size_t>(n)]
                                                      : "node " + std::to_string(n);
}

}  // namespace

FabricMap rdma_candidate_map(const std::vector<std::vector<Lane>>& lanes) {
  return build_map(lanes, [](int, int, int, int) { return true; });
}

std::vector<LanePair> match_lane_pairs(const std::vector<LanePair>& pairs) {
  std::set<int> local, remote;
  std::vector<LanePair> out;
  for (const auto& p : pairs)
    if (!local.count(p.local) && !remote.count(p.remote)) {
      local.insert(p.local);
      remote.insert(p.remote);
      out.push_back(p);
    }
  return out;
}

RocePeer choose_roce_peer(const FabricMap& map, const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& names, int a, int b,
                          const std::vector<std::string>& prefer_a,
                          const std::vector<std::string>& prefer_b) {
  RocePeer out;
  const auto& la = lanes[static_cast<std::size_t>(a)];
  const auto& lb = lanes[static_cast<std::size_t>(b)];
  const Route& r = map.route(a, b);
  if (r.kind == Route::Kind::direct) {
    std::vector<LanePair> preferred;
    for (const auto& p : r.lanes)
      if (listed(prefer_a, la[static_cast<std::size_t>(p.local)].name) &&
          listed(prefer_b, lb[static_cast<std::size_t>(p.remote)].name))
        preferred.push_back(p);
    out.kind = RocePeer::Kind::roce;
    if (preferred.empty()) {
      // The binding plan's lanes are on another cable: the map wins (docs/roce.md).
      out.map_won = true;
      out.pairs = match_lane_pairs(r.lanes);
      // Each end's preference named with the node it does not reach.
      std::string which;
      if (!prefer_a.empty())
        which = "SPARK_LANES=" + join(prefer_a) + " of " + name_of(names, a) + " does not reach " +
                name_of(names, b);
      if (!prefer_b.empty())
        which += (which.empty() ? "" : "; ") +
                 ("SPARK_LANES=" + join(prefer_b) + " of " + name_of(names, b) +
                  " does not reach " + name_of(names, a));
      out.note = which + "; the fabric map's lanes used";
    } else {
      out.pairs = match_lane_pairs(preferred);
    }
    return out;
  }
  if (r.kind == Route::Kind::relay && r.hops == 2) {
    // Both directions of a pair use one relay (it holds the pair's links both ways): the
    // lower-numbered node's first hop, a neighbour of both ends.
    out.kind = RocePeer::Kind::relay;
    out.via = map.route(std::min(a, b), std::max(a, b)).via;
    return out;
  }
  if (r.kind == Route::Kind::relay) {
    out.kind = RocePeer::Kind::tcp;
    out.note = "tcp, " + name_of(names, b) + " is " + std::to_string(r.hops) + " hops from " +
               name_of(names, a) + " and the RoCE relay forwards over one intermediate node only";
    return out;
  }
  out.kind = RocePeer::Kind::tcp;
  if (la.empty())
    out.note = "tcp, " + name_of(names, a) +
               " has no RDMA lane (no RDMA device with an IPv4 RoCE v2 GID; `sparkrun doctor`)";
  else if (lb.empty())
    out.note = "tcp, " + name_of(names, b) +
               " has no RDMA lane (no RDMA device with an IPv4 RoCE v2 GID; `sparkrun doctor`)";
  else
    out.note = "tcp, no RDMA lane of " + name_of(names, a) + " shares a subnet with " +
               name_of(names, b) + ", not even through a relay";
  return out;
}

std::string describe_roce_peer(const RocePeer& p, const std::vector<std::vector<Lane>>& lanes,
                               const std::vector<std::string>& names, int a, int b) {
  std::string s = name_of(names, a) + " -> " + name_of(names, b) + ": ";
  switch (p.kind) {
    case RocePeer::Kind::roce:
    case RocePeer::Kind::relay: {
      const int far = p.kind == RocePeer::Kind::relay ? p.via : b;
      s += p.kind == RocePeer::Kind::relay ? "roce relay via " + name_of(names, p.via) : "roce";
      for (const auto& lp : p.pairs) {
        const auto& la = lanes[static_cast<std::size_t>(a)][static_cast<std::size_t>(lp.local)];
        const auto& lb = lanes[static_cast<std::size_t>(far)][static_cast<std::size_t>(lp.remote)];
        s += ' ' + la.name + '(' + format_ipv4(la.ipv4) + ")->" + lb.name + '(' +
             format_ipv4(lb.ipv4) + ')';
      }
      if (p.map_won) s += " (map wins: " + p.note + ")";
      break;
    }
    case RocePeer::Kind::tcp:
      s += p.note;
      break;
  }
  return s;
}

bool RoceJob::any_roce() const {
  for (int a = 0; a < map.size(); ++a)
    for (int b = 0; b < map.size(); ++b) {
      auto k = map.route(a, b).kind;
      if (a != b && (k == Route::Kind::direct || k == Route::Kind::relay)) return true;
    }
  return false;
}

std::string RoceJob::mixed_tcp_map_problem() const {
  const int n = map.size();
  std::vector<bool> has_tcp(static_cast<std::size_t>(n), false);
  std::string tcp_pair, relayed;
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      const auto c = choose_roce_peer(map, lanes, hosts, a, b, {}, {});
      if (c.kind == RocePeer::Kind::tcp) {
        has_tcp[static_cast<std::size_t>(a)] = has_tcp[static_cast<std::size_t>(b)] = true;
        if (tcp_pair.empty()) tcp_pair = describe_roce_peer(c, lanes, hosts, a, b);
      } else if (c.kind == RocePeer::Kind::relay && relayed.empty()) {
        relayed = name_of(hosts, a) + " -> " + name_of(hosts, b) + " (roce via " +
                  name_of(hosts, c.via) + ")";
      }
    }
  if (tcp_pair.empty() || !any_roce()) return {};
  for (int x = 0; x < n; ++x)
    if (!has_tcp[static_cast<std::size_t>(x)])
      return tcp_pair + "; but " + name_of(hosts, x) +
             " reaches every node over RoCE, so it has no tcp transport to take part in the tcp "
             "map's fence and relays";
  if (!relayed.empty())
    return tcp_pair + "; but the tcp map would also route " + relayed +
           " through a tcp relay that waits for it";
  return {};
}

int RoceJob::speaker(int node) const {
  for (std::size_t r = 0; r < node_of.size(); ++r)
    if (node_of[r] == node) return static_cast<int>(r);
  return -1;
}

RocePeer RoceJob::peer(int from_rank, int to_rank) const {
  const int a = node_of[static_cast<std::size_t>(from_rank)];
  auto p = choose_roce_peer(map, lanes, hosts, a, node_of[static_cast<std::size_t>(to_rank)],
                            prefer[static_cast<std::size_t>(from_rank)],
                            prefer[static_cast<std::size_t>(to_rank)]);
  if (p.kind == RocePeer::Kind::relay) {
    // The links go to the relaying rank: the lane pairs toward its node, chosen as for a
    // direct peer (the relay computes the mirror image for its side).
    auto hop =
        choose_roce_peer(map, lanes, hosts, a, p.via, prefer[static_cast<std::size_t>(from_rank)],
                         prefer[static_cast<std::size_t>(speaker(p.via))]);
    p.pairs = hop.pairs;
    p.map_won = hop.map_won;
    if (hop.map_won) p.note = hop.note;
  }
  return p;
}

std::string RoceJob::describe(int from_rank, int to_rank, const RocePeer& choice) const {
  return describe_roce_peer(choice, lanes, hosts, node_of[static_cast<std::size_t>(from_rank)],
                            node_of[static_cast<std::size_t>(to_rank)]);
}

RoceFacts local_roce_facts(const std::optional<std::string>& ib_hca, std::string_view data_net,
                           const std::optional<std::string>& prefer, std::string_view ib_root) {
  // The map is per node: SPARK_IB_HCA (the user's choice) restricts it; SPARK_LANES (the
  // launcher's per-rank choice) is a preference the map may overrule (choose_roce_peer).
  const auto devs =
      ib_hca ? parse_rdma_devices(*ib_hca, "SPARK_IB_HCA") : std::vector<std::string>{};
  RoceFacts f;
  f.lanes = encode_lanes(local_rdma_lanes(devs, parse_nets(data_net, "SPARK_DATA_NET"), ib_root));
  if (prefer) f.prefer = join(parse_rdma_devices(*prefer, "SPARK_LANES"));
  return f;
}

RoceJob make_roce_job(const std::vector<std::string>& rank_hosts,
                      const std::vector<std::string>& rank_lanes,
                      const std::vector<std::string>& rank_prefer) {
  RoceJob j;
  const std::size_t n = rank_hosts.size();
  j.node_of.resize(n);
  j.prefer.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    auto it = std::find(j.hosts.begin(), j.hosts.end(), rank_hosts[r]);
    if (it == j.hosts.end()) {
      j.hosts.push_back(rank_hosts[r]);
      j.lanes.push_back(decode_lanes(rank_lanes.at(r)));
      it = j.hosts.end() - 1;
    }
    j.node_of[r] = static_cast<int>(it - j.hosts.begin());
    const std::string& p = rank_prefer.at(r);
    for (std::size_t s = 0; s < p.size();) {
      auto c = p.find(',', s);
      if (c == std::string::npos) c = p.size();
      if (c > s) j.prefer[r].push_back(p.substr(s, c - s));
      s = c + 1;
    }
  }
  j.map = rdma_candidate_map(j.lanes);
  return j;
}

}  // namespace spark::fabric
