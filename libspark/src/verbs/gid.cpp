#include "verbs/gid.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>

#include "spark/error.hpp"
#include "spark/protocol/number.hpp"
#include "verbs/verbs_error.hpp"

namespace spark::verbs {
namespace fs = std::filesystem;

namespace {

bool parse_uint(std::string_view s, unsigned long max, unsigned long* out) {
  std::int64_t v = 0;
  if (protocol::parse_integer(s, 0, static_cast<std::int64_t>(max), v) != protocol::Integer::ok)
    return false;
  *out = static_cast<unsigned long>(v);
  return true;
}

}  // namespace

std::optional<Gid> parse_sysfs_gid(std::string_view text) {
  if (text.size() != 39) return std::nullopt;
  Gid gid{};
  for (int g = 0; g < 8; ++g) {
    std::string_view part = text.substr(g * 5, 4);
    if (g < 7 && text[g * 5 + 4] != ':') return std::nullopt;
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + 4, v, 16);
    if (ec != std::errc() || ptr != part.data() + 4) return std::nullopt;
    gid[2 * g] = static_cast<std::uint8_t>(v >> 8);
    gid[2 * g + 1] = static_cast<std::uint8_t>(v & 0xff);
  }
  return gid;
}

std::string gid_text(const Gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, gid.data(), buf, sizeof buf) == nullptr) return "?";
  return buf;
}

std::optional<std::string> sysfs_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::uint32_t gid_ipv4(const Gid& g) noexcept {
  return (std::uint32_t{g[12]} << 24) | (std::uint32_t{g[13]} << 16) | (std::uint32_t{g[14]} << 8) |
         std::uint32_t{g[15]};
}

bool is_ipv4_mapped(const Gid& gid) noexcept {
  return std::all_of(gid.begin(), gid.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
         gid[10] == 0xff && gid[11] == 0xff;
}

int parse_gid_index(std::string_view value) {
  unsigned long v = 0;
  if (!parse_uint(value, 65535, &v)) {
    throw spark::ConfigError("SPARK_IB_GID_INDEX=\"" + std::string(value) +
                             "\" is not a GID index (expected a whole number 0..65535); unset "
                             "it to pick the IPv4 RoCE v2 GID automatically");
  }
  return static_cast<int>(v);
}

GidChoice select_gid(std::string_view sysfs_root, std::string_view device, int port,
                     const std::optional<std::string>& index_override) {
  const fs::path port_dir = fs::path(sysfs_root) / device / "ports" / std::to_string(port);
  const std::string where = std::string(device) + " port " + std::to_string(port);
  std::error_code ec;
  if (!fs::is_directory(port_dir / "gids", ec)) {
    throw VerbsError("no GID table for " + where + " (" + (port_dir / "gids").string() +
                     " missing): is " + std::string(device) + " an RDMA device?");
  }

  if (index_override) {
    int idx = parse_gid_index(*index_override);
    auto text = sysfs_line(port_dir / "gids" / std::to_string(idx));
    auto gid = text ? parse_sysfs_gid(*text) : std::nullopt;
    if (!gid || std::all_of(gid->begin(), gid->end(), [](std::uint8_t b) { return b == 0; })) {
      throw VerbsError("SPARK_IB_GID_INDEX=" + *index_override + " names no valid GID on " + where +
                       "; unset it to pick the IPv4 RoCE v2 GID automatically");
    }
    return GidChoice{idx, *gid, "SPARK_IB_GID_INDEX"};
  }

  // One pass over the table; the type is read only for IPv4-mapped entries (most of the
  // 1024 entries are empty).
  std::map<int, std::string> seen;  // index -> "gid (type)" for the error message
  std::optional<GidChoice> best;
  for (const auto& entry : fs::directory_iterator(port_dir / "gids", ec)) {
    unsigned long idx = 0;
    if (!parse_uint(entry.path().filename().string(), 65535, &idx)) continue;
    auto text = sysfs_line(entry.path());
    auto gid = text ? parse_sysfs_gid(*text) : std::nullopt;
    if (!gid || std::all_of(gid->begin(), gid->end(), [](std::uint8_t b) { return b == 0; }))
      continue;
    std::string type;
    if (is_ipv4_mapped(*gid)) {
      type = sysfs_line(port_dir / "gid_attrs" / "types" / std::to_string(idx)).value_or("?");
    }
    seen[static_cast<int>(idx)] = gid_text(*gid) + (type.empty() ? "" : " (" + type + ")");
    if (is_ipv4_mapped(*gid) && type == "RoCE v2" &&
        (!best || static_cast<int>(idx) < best->index)) {
      best = GidChoice{static_cast<int>(idx), *gid, "sysfs"};
    }
  }
  if (ec) throw VerbsError("cannot read " + (port_dir / "gids").string() + ": " + ec.message());
  if (!best) {
    std::string list;
    for (const auto& [i, s] : seen)
      list += (list.empty() ? "" : ", ") + std::to_string(i) + ": " + s;
    throw VerbsError("no IPv4 RoCE v2 GID on " + where +
                     " (GIDs: " + (list.empty() ? std::string("none") : list) +
                     "); give the device's netdev an IPv4 address (ip addr add ...) or set "
                     "SPARK_IB_GID_INDEX");
  }
  return *best;
}

}  // namespace spark::verbs
