#include "fabric/probe_protocol.hpp"

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>

#include "fabric/local_lanes.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::fabric {

std::string encode_triples(const std::vector<Triple>& entries) {
  std::string out;
  for (const auto& [x, y, z] : entries)
    out += std::to_string(x) + ":" + std::to_string(y) + ":" + std::to_string(z) + ";";
  return out;
}

std::vector<Triple> decode_triples(std::string_view text) {
  const std::string s(text);  // sscanf needs the terminator
  std::vector<Triple> out;
  for (std::size_t p = 0; p < s.size();) {
    Triple t{};
    if (std::sscanf(s.c_str() + p, "%d:%d:%d;", &t[0], &t[1], &t[2]) != 3) break;
    out.push_back(t);
    p = s.find(';', p);
    if (p == std::string::npos) break;
    ++p;
  }
  return out;
}

std::string encode_ports(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

std::vector<int> decode_ports(std::string_view text, std::string_view who) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (auto item : split(text, ',')) {
    std::int64_t p = 0;
    if (protocol::parse_integer(item, 1, 65535, p) != protocol::Integer::ok)
      throw BootstrapError("malformed port list '" + std::string(text) + "' from " +
                           std::string(who));
    out.push_back(static_cast<int>(p));
  }
  return out;
}

Nodes group_by_host(const std::vector<std::string>& host_of_rank) {
  Nodes n;
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    auto it = std::find(n.hosts.begin(), n.hosts.end(), host_of_rank[r]);
    if (it == n.hosts.end()) {
      n.hosts.push_back(host_of_rank[r]);
      n.speaker.push_back(static_cast<int>(r));
      it = n.hosts.end() - 1;
    }
    n.node_of.push_back(static_cast<int>(it - n.hosts.begin()));
  }
  return n;
}

std::string probe_higher(const std::vector<std::vector<Lane>>& lanes, int me,
                         const std::function<int(int, std::size_t)>& port,
                         std::chrono::milliseconds timeout) {
  std::vector<Triple> ok;
  const auto& mine = lanes[static_cast<std::size_t>(me)];
  const auto each = std::min(timeout, std::chrono::milliseconds(3000));
  for (int b = me + 1; b < static_cast<int>(lanes.size()); ++b) {
    const auto& theirs = lanes[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < mine.size(); ++i)
      for (std::size_t j = 0; j < theirs.size(); ++j)
        if (same_subnet(mine[i], theirs[j]) &&
            probe_connect(mine[i], theirs[j].ipv4, port(b, j), each))
          ok.push_back({b, static_cast<int>(i), static_cast<int>(j)});
  }
  return encode_triples(ok);
}

FabricMap map_from_probes(const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& published) {
  std::set<std::tuple<int, int, int, int>> works;
  for (std::size_t a = 0; a < published.size(); ++a)
    for (const auto& [b, i, j] : decode_triples(published[a]))
      works.insert({static_cast<int>(a), i, b, j});
  return build_map(lanes, [&](int a, int i, int b, int j) {
    return works.count({a, i, b, j}) > 0;
  });
}

}  // namespace spark::fabric
