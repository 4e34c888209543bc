#include "fabric/rdma_lanes.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

#include "fabric/local_lanes.hpp"
#include "spark/error.hpp"

namespace spark::fabric {
namespace fs = std::filesystem;

namespace {

std::optional<std::string> first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  // rxe answers EINVAL when the type or ndev of an unused GID entry is read: absent.
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::optional<unsigned> parse_uint(std::string_view s, unsigned max, int base = 10) {
  unsigned v = 0;
  if (s.empty() || s.size() > 10) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

// "0000:0000:0000:0000:0000:ffff:0a32:0001" -> 10.50.0.1; nullopt for any other GID.
std::optional<std::uint32_t> ipv4_of_gid(std::string_view text) {
  if (text.size() != 39) return std::nullopt;
  std::uint16_t g[8];
  for (std::size_t i = 0; i < 8; ++i) {
    if (i < 7 && text[i * 5 + 4] != ':') return std::nullopt;
    auto v = parse_uint(text.substr(i * 5, 4), 0xffff, 16);
    if (!v) return std::nullopt;
    g[i] = static_cast<std::uint16_t>(*v);
  }
  if (g[0] || g[1] || g[2] || g[3] || g[4] || g[5] != 0xffff) return std::nullopt;
  const std::uint32_t a = (std::uint32_t{g[6]} << 16) | g[7];
  if (a == 0) return std::nullopt;
  return a;
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
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (auto* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !p->ifa_netmask) continue;
    if ((p->ifa_flags & IFF_UP) == 0 || (p->ifa_flags & IFF_LOOPBACK) != 0) continue;
    NetdevAddress a;
    a.netdev = p->ifa_name;
    a.ipv4 = ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr);
    a.prefix =
        __builtin_popcount(ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_netmask)->sin_addr.s_addr));
    out.push_back(std::move(a));
  }
  freeifaddrs(ifa);
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
        auto text = first_line(pdir / "gids" / g);
        if (auto a = text ? ipv4_of_gid(*text) : std::nullopt) v4.emplace_back(*idx, *a);
      }
      std::sort(v4.begin(), v4.end());
      bool found = false, explained = false;
      for (const auto& [idx, addr] : v4) {
        const auto i = std::to_string(idx);
        if (first_line(pdir / "gid_attrs" / "types" / i).value_or("") != "RoCE v2") continue;
        const auto ndev = first_line(pdir / "gid_attrs" / "ndevs" / i).value_or("");
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
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    auto item = text.substr(start, comma == text.npos ? text.npos : comma - start);
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
    if (comma == text.npos) return out;
    start = comma + 1;
  }
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
