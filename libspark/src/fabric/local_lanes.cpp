#include "fabric/local_lanes.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>

namespace spark::fabric {

std::vector<std::pair<std::uint32_t, int>> parse_nets(std::string_view text,
                                                      std::string_view what) {
  std::vector<std::pair<std::uint32_t, int>> out;
  if (text.empty()) return out;
  for (auto item : split(text, ',')) out.push_back(parse_cidr(item, what));
  return out;
}

std::vector<Lane> local_lanes(const std::vector<std::pair<std::uint32_t, int>>& nets) {
  std::vector<Lane> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (auto* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !p->ifa_netmask) continue;
    if ((p->ifa_flags & IFF_UP) == 0 || (p->ifa_flags & IFF_LOOPBACK) != 0) continue;
    Lane l;
    l.name = p->ifa_name;
    l.ipv4 = ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr);
    auto mask = ntohl(reinterpret_cast<sockaddr_in*>(p->ifa_netmask)->sin_addr.s_addr);
    l.prefix = __builtin_popcount(mask);
    l.port = static_cast<int>(if_nametoindex(p->ifa_name));
    if (in_nets(l, nets)) out.push_back(std::move(l));
  }
  freeifaddrs(ifa);
  std::sort(out.begin(), out.end(), [](const Lane& a, const Lane& b) { return a.name < b.name; });
  return out;
}

}  // namespace spark::fabric
