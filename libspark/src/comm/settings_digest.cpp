#include "comm/settings_digest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "bootstrap/wire.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

#ifndef SPARK_LIBRARY_VERSION
#error "SPARK_LIBRARY_VERSION must be defined (libspark/CMakeLists.txt)"
#endif

namespace spark::settings_digest {
namespace {

// "rank 1", "ranks 0,2", "ranks 0-3,5": ranks ascending.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

// " (host b)", " (hosts a,c)": where those ranks run, in rank order, each host once, when the
// job spans hosts (a host's own environment is the usual cause); "" on one host.
std::string host_list(const std::vector<int>& ranks, std::span<const std::string> nodes) {
  if (nodes.empty() ||
      std::all_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n == nodes.front(); }))
    return "";
  std::vector<std::string> hosts;
  for (int r : ranks) {
    const auto& h = nodes[static_cast<std::size_t>(r)];
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  }
  constexpr std::size_t kShown = 4;  // a line, not a host list
  std::string out = hosts.size() == 1 ? " (host " : " (hosts ";
  for (std::size_t i = 0; i < hosts.size() && i < kShown; ++i) out += (i ? "," : "") + hosts[i];
  if (hosts.size() > kShown) out += fmt::format(" and {} more", hosts.size() - kShown);
  return out + ")";
}

std::string shown(const std::string& value) {
  return value.empty() ? "(unset)" : value;
}

// The value of a name a rank did not send (its library has no such row: another version, which
// the version entry reports).
constexpr std::string_view kMissing = "(not a setting there)";

struct Group {
  std::string value;
  std::vector<int> ranks;
};

}  // namespace

Settings of(const CommOptions& options) {
  Settings s;
  s.reserve(options.job_settings.size() + 1);
  s.emplace_back(kVersion, SPARK_LIBRARY_VERSION);
  s.insert(s.end(), options.job_settings.begin(), options.job_settings.end());
  return s;
}

std::vector<std::byte> encode(int rank, const Settings& settings) {
  bootstrap::wire::Writer w(bootstrap::wire::Type::fence_ok);
  w.u32(static_cast<std::uint32_t>(settings.size()));
  for (const auto& [name, value] : settings)
    w.u32(static_cast<std::uint32_t>(rank)).str(name).str(value);
  return w.finish();
}

Settings decode(int rank, std::span<const std::byte> bytes) {
  try {
    using bootstrap::wire::ProtocolError;
    if (bytes.size() < 4) throw ProtocolError("truncated");
    // Exactly what encode() writes: the length field says the rest, every entry names the
    // rank the record was read from, nothing after the last entry.
    std::byte prefix[4];
    std::copy_n(bytes.begin(), 4, prefix);
    if (bootstrap::wire::frame_length(prefix) != bytes.size() - 4)
      throw ProtocolError(fmt::format("its length field says {} bytes, not {}",
                                      bootstrap::wire::frame_length(prefix), bytes.size() - 4));
    bootstrap::wire::Reader in(bytes.subspan(4));
    if (in.type() != bootstrap::wire::Type::fence_ok) throw ProtocolError("not an entry list");
    Settings s;
    const auto n = in.u32();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (const auto writer = in.u32(); writer != static_cast<std::uint32_t>(rank))
        throw ProtocolError(fmt::format("entry {} names rank {}", i, writer));
      auto name = in.str();
      s.emplace_back(std::move(name), in.str());
    }
    if (!in.at_end()) throw ProtocolError("bytes after the last entry");
    return s;
  } catch (const bootstrap::wire::ProtocolError& e) {
    throw BootstrapError(fmt::format(
        "wire-up: rank {}'s settings record ({}) is malformed ({}): is every rank running "
        "the same libspark?",
        rank, kKey, e.what()));
  }
}

std::optional<std::string> verdict(std::span<const Settings> by_rank,
                                   std::span<const std::string> nodes) {
  if (!nodes.empty() && nodes.size() != by_rank.size()) nodes = {};
  // Every name any rank sent, in the order of first appearance (rank 0's table order).
  std::vector<std::string> names;
  for (const auto& s : by_rank)
    for (const auto& [name, value] : s)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);

  std::vector<std::string> differences, suggestions;
  bool version_differs = false;
  for (const auto& name : names) {
    std::vector<Group> groups;
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      const auto& s = by_rank[r];
      const auto it =
          std::find_if(s.begin(), s.end(), [&](const auto& e) { return e.first == name; });
      // A rank whose library has no such row (another version: the version entry says so).
      const std::string value = it == s.end() ? std::string(kMissing) : it->second;
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const Group& x) { return x.value == value; });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{value, {}});
      g->ranks.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2) continue;
    // The odd ones out first (fewest ranks), then by lowest rank.
    std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
      return a.ranks.size() != b.ranks.size() ? a.ranks.size() < b.ranks.size()
                                              : a.ranks.front() < b.ranks.front();
    });
    std::string line = name == kVersion ? name + " " : name + "=";
    for (std::size_t i = 0; i < groups.size(); ++i)
      line += (i ? ", " : "") + shown(groups[i].value) + " on " + rank_list(groups[i].ranks) +
              host_list(groups[i].ranks, nodes);
    differences.push_back(std::move(line));
    if (name == kVersion) {
      version_differs = true;
      continue;
    }
    // Suggest the value someone chose: the first one (the odd ones out first) that is set
    // and not the default; else the value most ranks have.
    const auto* knob = config::find_knob(name);
    const auto chosen = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return !g.value.empty() && g.value != kMissing && (!knob || g.value != knob->default_value);
    });
    suggestions.push_back("-x " + name + "=" +
                          (chosen != groups.end() ? chosen->value : groups.back().value));
  }
  if (differences.empty()) return std::nullopt;

  std::string out = "settings differ between ranks: ";
  for (std::size_t i = 0; i < differences.size(); ++i) out += (i ? "; " : "") + differences[i];
  std::vector<std::string> fixes;
  if (version_differs) fixes.push_back("run the same libspark build on every host");
  if (!suggestions.empty()) {
    std::string fix = suggestions.size() == 1 ? "give every rank the same value, e.g. with"
                                              : "give every rank the same values, e.g. with";
    for (const auto& s : suggestions) fix += " " + s;
    fixes.push_back(std::move(fix));
  }
  out += " (";
  for (std::size_t i = 0; i < fixes.size(); ++i) out += (i ? "; " : "") + fixes[i];
  return out + ")";
}

}  // namespace spark::settings_digest
