#include "lanes.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "spark/topo/error.hpp"

namespace spark::topo::detail {

std::string list_lanes(const std::vector<Lane>& lanes) {
  if (lanes.empty()) return "none (no PCI function with vendor 0x15b3)";
  std::string out;
  for (const auto& l : lanes) {
    if (!out.empty()) out += ", ";
    out += l.name + " (";
    if (!l.net.empty() && l.net != l.name) out += l.net + ", ";
    out += "PCI " + l.pci_busid + ")";
  }
  return out;
}

std::vector<std::size_t> select_lanes(const std::vector<Lane>& lanes, const std::string& spec,
                                      const std::string& source) {
  auto fail = [&](const std::string& why) {
    throw TopologyError(source + "=\"" + spec + "\": " + why +
                        "; existing HCAs: " + list_lanes(lanes));
  };
  std::string_view rest(spec);
  bool exclude = false, exact = false;
  if (!rest.empty() && rest.front() == '^') {
    exclude = true;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest.front() == '=') {
    exact = true;
    rest.remove_prefix(1);
  }
  if (rest.empty()) fail("no HCA named");

  std::vector<std::size_t> picked;
  std::vector<bool> hit(lanes.size(), false);
  std::size_t start = 0;
  while (true) {
    std::size_t comma = rest.find(',', start);
    std::string_view item = rest.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) fail("empty entry in the list");
    if (auto colon = item.find(':'); colon != std::string_view::npos) {
      // NCCL's "hca:port"; a CX7 RoCE function has one port, so the number is only validated.
      std::string_view port = item.substr(colon + 1);
      unsigned value = 0;
      auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
      if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value == 0 ||
          value > 255) {
        fail("\"" + std::string(item) + "\" has a bad port number (write name or name:1)");
      }
      item = item.substr(0, colon);
    }
    bool matched = false;
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      auto matches = [&](const std::string& name) {
        return !name.empty() && (exact ? name == item : name.rfind(item, 0) == 0);
      };
      if (matches(lanes[i].rdma) || matches(lanes[i].net) || matches(lanes[i].name)) {
        matched = true;
        if (!hit[i]) picked.push_back(i);
        hit[i] = true;
      }
    }
    if (!matched) fail("no HCA named \"" + std::string(item) + "\" on this machine");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (!exclude) return picked;
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < lanes.size(); ++i) {
    if (!hit[i]) kept.push_back(i);
  }
  if (kept.empty()) fail("excludes every HCA");
  return kept;
}

std::vector<std::string> auto_lanes(const std::vector<Lane>& lanes,
                                    const std::vector<std::size_t>& pool, int rank) {
  std::map<std::string, std::vector<std::size_t>> by_link;  // link -> lanes, by function
  for (std::size_t i : pool) by_link[lanes[i].link].push_back(i);
  std::vector<std::string> out;
  for (auto& [link, members] : by_link) {
    std::sort(members.begin(), members.end(),
              [&](std::size_t a, std::size_t b) { return lanes[a].function < lanes[b].function; });
    out.push_back(lanes[members[static_cast<std::size_t>(rank) % members.size()]].name);
  }
  return out;
}

}  // namespace spark::topo::detail
