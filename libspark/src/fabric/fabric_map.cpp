#include "fabric/fabric_map.hpp"

#include <deque>
#include <sstream>

#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::fabric {

namespace {

[[noreturn]] void bad(std::string_view what, std::string_view text, std::string_view expect) {
  throw ConfigError(std::string(what) + "='" + std::string(text) + "' is not " +
                    std::string(expect));
}

int parse_int(std::string_view text, int lo, int hi, std::string_view what, std::string_view all) {
  std::int64_t v = 0;
  if (protocol::parse_integer(text, lo, hi, v) != protocol::Integer::ok)
    bad(what, all,
        "valid (expected a number " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
  return static_cast<int>(v);
}

}  // namespace

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    auto pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

std::uint32_t parse_ipv4(std::string_view text, std::string_view what) {
  auto parts = split(text, '.');
  if (parts.size() != 4) bad(what, text, "an IPv4 address (a.b.c.d)");
  std::uint32_t v = 0;
  for (auto p : parts) {
    if (p.empty() || p.size() > 3) bad(what, text, "an IPv4 address (a.b.c.d)");
    v = (v << 8) | static_cast<std::uint32_t>(parse_int(p, 0, 255, what, text));
  }
  return v;
}

std::string format_ipv4(std::uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

std::pair<std::uint32_t, int> parse_cidr(std::string_view text, std::string_view what) {
  auto slash = text.find('/');
  if (slash == text.npos) bad(what, text, "an IPv4 subnet (a.b.c.d/prefix)");
  return {parse_ipv4(text.substr(0, slash), what),
          parse_int(text.substr(slash + 1), 0, 32, what, text)};
}

std::uint32_t netmask(int prefix) {
  return prefix <= 0 ? 0u : prefix >= 32 ? 0xffffffffu : ~((1u << (32 - prefix)) - 1u);
}

bool same_subnet(const Lane& a, const Lane& b) {
  if (a.prefix != b.prefix || a.ipv4 == b.ipv4) return false;
  auto m = netmask(a.prefix);
  return (a.ipv4 & m) == (b.ipv4 & m);
}

bool in_nets(const Lane& lane, const std::vector<std::pair<std::uint32_t, int>>& nets) {
  if (nets.empty()) return true;
  for (auto [net, prefix] : nets) {
    auto m = netmask(prefix);
    if ((lane.ipv4 & m) == (net & m)) return true;
  }
  return false;
}

std::string encode_lanes(const std::vector<Lane>& lanes) {
  std::string out;
  for (const auto& l : lanes) {
    if (!out.empty()) out += ';';
    out += l.name + ',' + std::to_string(l.port) + ',' + format_ipv4(l.ipv4) + '/' +
           std::to_string(l.prefix);
  }
  return out;
}

std::vector<Lane> decode_lanes(std::string_view text) {
  std::vector<Lane> out;
  if (text.empty()) return out;
  for (auto item : split(text, ';')) {
    auto f = split(item, ',');
    if (f.size() != 3 || f[0].empty()) bad("fabric lane", item, "name,port,a.b.c.d/prefix");
    Lane l;
    l.name = std::string(f[0]);
    l.port = parse_int(f[1], 0, 1 << 20, "fabric lane port", item);
    std::tie(l.ipv4, l.prefix) = parse_cidr(f[2], "fabric lane address");
    out.push_back(std::move(l));
  }
  return out;
}

const Route& FabricMap::route(int from, int to) const {
  if (from < 0 || to < 0 || from >= size() || to >= size())
    throw InvalidUsage("fabric map: node " + std::to_string(from) + " -> " + std::to_string(to) +
                       " outside 0.." + std::to_string(size() - 1));
  return routes_[static_cast<std::size_t>(from)][static_cast<std::size_t>(to)];
}

bool FabricMap::fully_connected() const {
  for (int a = 0; a < size(); ++a)
    for (int b = 0; b < size(); ++b)
      if (a != b && route(a, b).kind != Route::Kind::direct) return false;
  return true;
}

std::vector<int> FabricMap::neighbours(int node) const {
  std::vector<int> out;
  for (int b = 0; b < size(); ++b)
    if (b != node && route(node, b).kind == Route::Kind::direct) out.push_back(b);
  return out;
}

std::string FabricMap::describe(const std::vector<std::string>& names,
                                const std::vector<std::vector<Lane>>& lanes) const {
  auto name = [&](int n) {
    return n < static_cast<int>(names.size()) ? names[static_cast<std::size_t>(n)]
                                              : std::to_string(n);
  };
  std::ostringstream os;
  for (int a = 0; a < size(); ++a)
    for (int b = 0; b < size(); ++b) {
      if (a == b) continue;
      const auto& r = route(a, b);
      os << name(a) << " -> " << name(b) << ": ";
      switch (r.kind) {
        case Route::Kind::direct: {
          os << "direct";
          for (auto lp : r.lanes) {
            const auto& la = lanes[static_cast<std::size_t>(a)][static_cast<std::size_t>(lp.local)];
            const auto& lb =
                lanes[static_cast<std::size_t>(b)][static_cast<std::size_t>(lp.remote)];
            os << ' ' << la.name << '(' << format_ipv4(la.ipv4) << ")->" << lb.name << '('
               << format_ipv4(lb.ipv4) << ')';
          }
          break;
        }
        case Route::Kind::relay:
          os << "relay via " << name(r.via) << " (" << r.hops << " hops)";
          break;
        case Route::Kind::unreachable:
          os << "UNREACHABLE";
          break;
        case Route::Kind::self:
          os << "self";
          break;
      }
      os << '\n';
    }
  return os.str();
}

void add_relays(std::vector<std::vector<Route>>& routes) {
  const int n = static_cast<int>(routes.size());
  auto at = [&](int a, int b) -> Route& {
    return routes[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  };
  // Relays: BFS from each destination over direct links, so every node's first hop toward
  // `dst` is a neighbour one step closer; lowest-numbered neighbour wins ties (deterministic).
  for (int dst = 0; dst < n; ++dst) {
    std::vector<int> dist(static_cast<std::size_t>(n), -1);
    dist[static_cast<std::size_t>(dst)] = 0;
    std::deque<int> q{dst};
    while (!q.empty()) {
      int v = q.front();
      q.pop_front();
      for (int u = 0; u < n; ++u)
        if (dist[static_cast<std::size_t>(u)] < 0 && at(v, u).kind == Route::Kind::direct) {
          dist[static_cast<std::size_t>(u)] = dist[static_cast<std::size_t>(v)] + 1;
          q.push_back(u);
        }
    }
    for (int src = 0; src < n; ++src) {
      auto& r = at(src, dst);
      int d = dist[static_cast<std::size_t>(src)];
      if (r.kind != Route::Kind::unreachable || d < 0) continue;
      for (int u = 0; u < n; ++u)
        if (at(src, u).kind == Route::Kind::direct && dist[static_cast<std::size_t>(u)] == d - 1) {
          r.kind = Route::Kind::relay;
          r.via = u;
          r.hops = d;
          break;
        }
    }
  }
}

FabricMap build_map(const std::vector<std::vector<Lane>>& lanes, const Probe& probe) {
  const int n = static_cast<int>(lanes.size());
  std::vector<std::vector<Route>> routes(static_cast<std::size_t>(n),
                                         std::vector<Route>(static_cast<std::size_t>(n)));
  auto at = [&](int a, int b) -> Route& {
    return routes[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  };
  for (int a = 0; a < n; ++a) {
    at(a, a).kind = Route::Kind::self;
    for (int b = a + 1; b < n; ++b) {
      const auto& la = lanes[static_cast<std::size_t>(a)];
      const auto& lb = lanes[static_cast<std::size_t>(b)];
      for (int i = 0; i < static_cast<int>(la.size()); ++i)
        for (int j = 0; j < static_cast<int>(lb.size()); ++j)
          if (same_subnet(la[static_cast<std::size_t>(i)], lb[static_cast<std::size_t>(j)]) &&
              probe(a, i, b, j)) {
            at(a, b).lanes.push_back({i, j});
            at(b, a).lanes.push_back({j, i});
          }
      for (int x : {a, b}) {
        auto& r = at(x, x == a ? b : a);
        if (!r.lanes.empty()) {
          r.kind = Route::Kind::direct;
          r.hops = 1;
        }
      }
    }
  }
  add_relays(routes);
  return FabricMap(std::move(routes));
}

std::vector<int> ring_order(const FabricMap& map) {
  const int n = map.size();
  if (n <= 1) return n == 1 ? std::vector<int>{0} : std::vector<int>{};
  auto direct = [&](int a, int b) { return map.route(a, b).kind == Route::Kind::direct; };
  if (n == 2) return direct(0, 1) ? std::vector<int>{0, 1} : std::vector<int>{};
  // Depth-first search for a Hamiltonian cycle, lowest neighbour first. Switchless fabrics
  // have a handful of nodes; the step budget keeps a large odd map from taking long.
  std::vector<int> path{0};
  std::vector<bool> used(static_cast<std::size_t>(n), false);
  used[0] = true;
  long budget = 1000000;
  std::function<bool()> extend = [&]() -> bool {
    if (--budget < 0) return false;
    if (static_cast<int>(path.size()) == n) return direct(path.back(), 0);
    for (int u = 0; u < n; ++u) {
      if (used[static_cast<std::size_t>(u)] || !direct(path.back(), u)) continue;
      used[static_cast<std::size_t>(u)] = true;
      path.push_back(u);
      if (extend()) return true;
      path.pop_back();
      used[static_cast<std::size_t>(u)] = false;
    }
    return false;
  };
  return extend() ? path : std::vector<int>{};
}

std::vector<int> rank_ring(const std::vector<int>& node_ring, const std::vector<int>& node_of) {
  std::vector<int> out;
  for (int node : node_ring)
    for (int r = 0; r < static_cast<int>(node_of.size()); ++r)
      if (node_of[static_cast<std::size_t>(r)] == node) out.push_back(r);
  return out;
}

}  // namespace spark::fabric
