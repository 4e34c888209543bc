#include "fabric/rdma_lanes.hpp"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "fabric/local_lanes.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"
#include "verbs/gid.hpp"

namespace spark::fabric {
namespace fs = std::filesystem;

namespace {

std::optional<unsigned> parse_uint(std::string_view s, unsigned max) {
  std::int64_t v = 0;
  if (protocol::parse_integer(s, 0, max, v) != protocol::Integer::ok) return std::nullopt;
  return static_cast<unsigned>(v);
}

// The PCI function of the device ("0000:01:00.1" -> 1), which is the QSFP port on a CX7;
// nullopt for a device that is not a PCI function (rxe, siw).
std::optional<int> pci_function(const fs::path& dev) {
  std::error_code ec;
  auto target = fs::read_symlink(dev / "device", ec);
  if (ec) return std::nullopt;
  const std::string bdf = target.filename().string();  // dddd:bb:dd.f
  if (bdf.size() != 12 || bdf[4] != ':' || bdf[7] != ':' || bdf[10] != '.') return std::nullopt;
  auto f = parse_uint(std::string_view(bdf).substr(11), 7);
  if (!f) return std::nullopt;
  return static_cast<int>(*f);
}

std::vector<std::string> sorted_names(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<NetdevAddress> netdev_addresses() {
  std::vector<NetdevAddress> out;
  for (const Lane& l : local_lanes({})) out.push_back({l.name, l.ipv4, l.prefix});
  return out;
}

std::vector<RdmaFunction> rdma_functions(std::string_view ib_root,
                                         const std::vector<NetdevAddress>& addresses,
                                         std::vector<std::string>* skipped) {
  std::vector<RdmaFunction> out;
  auto skip = [&](const std::string& why) {
    if (skipped) skipped->push_back(why);
  };
  for (const auto& dev : sorted_names(fs::path(ib_root))) {
    const fs::path dev_dir = fs::path(ib_root) / dev;
    std::vector<unsigned> ports;
    for (const auto& p : sorted_names(dev_dir / "ports"))
      if (auto n = parse_uint(p, 255)) ports.push_back(*n);
    std::sort(ports.begin(), ports.end());
    if (ports.empty()) skip(dev + ": no ports in sysfs");
    for (unsigned port : ports) {
      const fs::path pdir = dev_dir / "ports" / std::to_string(port);
      const std::string where = dev + " port " + std::to_string(port);
      // The lowest-index IPv4 RoCE v2 GID, as the verbs transport chooses it (gid.cpp).
      std::vector<std::pair<unsigned, std::uint32_t>> v4;
      for (const auto& g : sorted_names(pdir / "gids")) {
        auto idx = parse_uint(g, 65535);
        if (!idx) continue;
        auto gid = verbs::parse_sysfs_gid(verbs::sysfs_line(pdir / "gids" / g).value_or(""));
        if (gid && verbs::is_ipv4_mapped(*gid) && verbs::gid_ipv4(*gid) != 0)
          v4.emplace_back(*idx, verbs::gid_ipv4(*gid));
      }
      std::sort(v4.begin(), v4.end());
      bool found = false, explained = false;
      for (const auto& [idx, addr] : v4) {
        const auto i = std::to_string(idx);
        if (verbs::sysfs_line(pdir / "gid_attrs" / "types" / i).value_or("") != "RoCE v2") continue;
        const auto ndev = verbs::sysfs_line(pdir / "gid_attrs" / "ndevs" / i).value_or("");
        // (A copy of the binding: clang 14, the fuzz build's compiler, cannot capture one.)
        auto a = std::find_if(addresses.begin(), addresses.end(),
                              [&, addr = addr](const NetdevAddress& x) {
                                return x.ipv4 == addr && (ndev.empty() || x.netdev == ndev);
                              });
        if (a == addresses.end()) {
          skip(where + ": RoCE v2 GID " + i + " is " + format_ipv4(addr) + " but " +
               (ndev.empty() ? std::string("no interface") : ndev) +
               " has no such up address (stale GID table?)");
          explained = true;
          continue;
        }
        RdmaFunction f;
        f.lane.name = dev;
        f.lane.port = pci_function(dev_dir).value_or(static_cast<int>(port));
        f.lane.ipv4 = addr;
        f.lane.prefix = a->prefix;
        f.netdev = a->netdev;
        f.ib_port = static_cast<int>(port);
        f.gid_index = static_cast<int>(idx);
        out.push_back(std::move(f));
        found = true;
        break;
      }
      if (!found && v4.empty())
        skip(where + ": no IPv4 RoCE v2 GID (give its interface an IPv4 address)");
      else if (!found && !explained)
        skip(where + ": no usable IPv4 RoCE v2 GID");
    }
  }
  return out;
}

std::vector<std::string> parse_rdma_devices(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return ConfigError(std::string(what) + "=\"" + std::string(text) + "\": " + why +
                       "; expected a comma-separated list of RDMA devices, e.g. "
                       "rocep1s0f0,roceP2p1s0f0 (see `ibv_devices`)");
  };
  if (text.empty()) throw bad("empty value");
  if (text.front() == '^' || text.front() == '=')
    throw bad("exclusion (^) and exact-match (=) lists are not supported: name the devices");
  std::vector<std::string> out;
  for (auto item : split(text, ',')) {
    if (auto colon = item.find(':'); colon != item.npos) {
      if (item.substr(colon + 1) != "1")
        throw bad("only port 1 is supported (got \"" + std::string(item) + "\")");
      item = item.substr(0, colon);
    }
    if (item.empty()) throw bad("empty device name");
    for (char c : item)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
        throw bad("invalid device name \"" + std::string(item) + "\"");
    out.emplace_back(item);
  }
  return out;
}

std::vector<Lane> local_rdma_lanes(const std::vector<std::string>& devices,
                                   const std::vector<std::pair<std::uint32_t, int>>& nets,
                                   std::string_view ib_root) {
  std::vector<std::string> skipped;
  auto all = rdma_functions(ib_root, netdev_addresses(), &skipped);
  std::vector<Lane> out;
  for (const auto& want : devices) {
    if (std::none_of(all.begin(), all.end(),
                     [&](const RdmaFunction& f) { return f.lane.name == want; })) {
      std::string why;
      for (const auto& s : skipped)
        if (s.rfind(want + " ", 0) == 0 || s.rfind(want + ":", 0) == 0) why += "; " + s;
      throw ConfigError(
          "RDMA device " + want + " is not a usable lane" +
          (why.empty() ? std::string(" (not in ") + std::string(ib_root) + ")" : why));
    }
  }
  for (auto& f : all) {
    if (!devices.empty() && std::find(devices.begin(), devices.end(), f.lane.name) == devices.end())
      continue;
    if (in_nets(f.lane, nets)) out.push_back(std::move(f.lane));
  }
  return out;
}

std::vector<Lane> node_lanes(LaneKind kind, const std::vector<std::string>& devices,
                             const std::vector<std::pair<std::uint32_t, int>>& nets,
                             std::string_view ib_root) {
  if (kind == LaneKind::net) return local_lanes(nets);
  if (kind == LaneKind::automatic && rdma_functions(ib_root, netdev_addresses()).empty())
    return local_lanes(nets);
  return local_rdma_lanes(devices, nets, ib_root);
}

}  // namespace spark::fabric
