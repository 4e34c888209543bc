#include "fabric/fabric_file.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spark/error.hpp"

namespace spark::fabric {

namespace {

Cable make_cable(std::string a, std::string b) {
  if (b < a) std::swap(a, b);
  return {std::move(a), std::move(b)};
}

std::string show(const FabricFile& f) {
  std::ostringstream os;
  os << "  hosts:";
  for (const auto& h : f.hosts) os << ' ' << h;
  os << '\n';
  for (const auto& c : f.cables) os << "  cable " << c.first << " <-> " << c.second << '\n';
  return os.str();
}

}  // namespace

FabricFile from_map(const std::vector<std::string>& hosts,
                    const std::vector<std::vector<Lane>>& lanes, const FabricMap& map) {
  FabricFile f{hosts, lanes, {}};
  for (int a = 0; a < map.size(); ++a)
    for (int b = a + 1; b < map.size(); ++b) {
      const auto& r = map.route(a, b);
      if (r.kind != Route::Kind::direct) continue;
      for (auto lp : r.lanes)
        f.cables.insert(make_cable(
            hosts[static_cast<std::size_t>(a)] + ":" +
                lanes[static_cast<std::size_t>(a)][static_cast<std::size_t>(lp.local)].name,
            hosts[static_cast<std::size_t>(b)] + ":" +
                lanes[static_cast<std::size_t>(b)][static_cast<std::size_t>(lp.remote)].name));
    }
  return f;
}

std::string to_json(const FabricFile& f) {
  nlohmann::ordered_json j;
  j["hosts"] = nlohmann::ordered_json::array();
  for (std::size_t h = 0; h < f.hosts.size(); ++h) {
    nlohmann::ordered_json host;
    host["name"] = f.hosts[h];
    host["ports"] = nlohmann::ordered_json::array();
    if (h < f.lanes.size())
      for (const auto& l : f.lanes[h])
        host["ports"].push_back({{"name", l.name},
                                 {"port", l.port},
                                 {"ipv4", format_ipv4(l.ipv4) + "/" + std::to_string(l.prefix)}});
    j["hosts"].push_back(std::move(host));
  }
  j["cables"] = nlohmann::ordered_json::array();
  for (const auto& c : f.cables) j["cables"].push_back({c.first, c.second});
  return j.dump(2) + "\n";
}

FabricFile parse_fabric_json(const std::string& text, const std::string& origin) {
  auto fail = [&](const std::string& why) -> void {
    throw ConfigError("fabric file " + origin + ": " + why +
                      " (write one with `sparkrun fabric --write FILE`)");
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("hosts") || !j["hosts"].is_array() || !j.contains("cables") ||
      !j["cables"].is_array())
    fail("expected an object with arrays \"hosts\" and \"cables\"");
  FabricFile f;
  std::set<std::string> ends;  // "host:lane" that exist
  for (const auto& h : j["hosts"]) {
    if (!h.is_object() || !h.contains("name") || !h["name"].is_string() ||
        h["name"].get<std::string>().empty())
      fail("every host needs a non-empty \"name\"");
    auto name = h["name"].get<std::string>();
    for (const auto& seen : f.hosts)
      if (seen == name) fail("host '" + name + "' listed twice");
    f.hosts.push_back(name);
    std::vector<Lane> lanes;
    if (h.contains("ports")) {
      if (!h["ports"].is_array()) fail("host '" + name + "': \"ports\" must be an array");
      for (const auto& p : h["ports"]) {
        if (!p.is_object() || !p.contains("name") || !p["name"].is_string() ||
            !p.contains("ipv4") || !p["ipv4"].is_string())
          fail("host '" + name + "': every port needs \"name\" and \"ipv4\"");
        Lane l;
        l.name = p["name"].get<std::string>();
        if (p.contains("port")) {
          if (!p["port"].is_number_integer())
            fail("host '" + name + "': \"port\" must be an integer");
          l.port = p["port"].get<int>();
        }
        std::tie(l.ipv4, l.prefix) =
            parse_cidr(p["ipv4"].get<std::string>(), "fabric file port ipv4");
        ends.insert(name + ":" + l.name);
        lanes.push_back(std::move(l));
      }
    }
    f.lanes.push_back(std::move(lanes));
  }
  for (const auto& c : j["cables"]) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_string() || !c[1].is_string())
      fail("every cable is [\"host:lane\", \"host:lane\"]");
    auto a = c[0].get<std::string>(), b = c[1].get<std::string>();
    for (const auto& e : {a, b}) {
      auto colon = e.find(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == e.size())
        fail("cable end '" + e + "' is not host:lane");
      bool known = false;
      for (const auto& h : f.hosts) known = known || h == e.substr(0, colon);
      if (!known) fail("cable end '" + e + "' names a host not in \"hosts\"");
    }
    f.cables.insert(make_cable(a, b));
  }
  return f;
}

FabricFile load_fabric_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw ConfigError("fabric file " + path +
                      ": cannot be read (check the path given to --fabric)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_fabric_json(ss.str(), path);
}

std::string compare(const FabricFile& pinned, const FabricFile& found) {
  std::ostringstream diff;
  if (pinned.hosts != found.hosts) diff << "  hosts differ\n";
  for (const auto& c : pinned.cables)
    if (!found.cables.count(c))
      diff << "  missing cable " << c.first << " <-> " << c.second << '\n';
  for (const auto& c : found.cables)
    if (!pinned.cables.count(c))
      diff << "  unexpected cable " << c.first << " <-> " << c.second << '\n';
  if (diff.str().empty()) return {};
  return "fabric map differs from the pinned file:\n" + diff.str() + "pinned:\n" + show(pinned) +
         "found:\n" + show(found);
}

}  // namespace spark::fabric
