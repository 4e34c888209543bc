#include "remote_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

bool parse_v4(const std::string& s, in_addr& out) {
  return ::inet_pton(AF_INET, s.c_str(), &out) == 1;
}

std::string available() {
  std::string s;
  for (const auto& [ifname, addr] : local_ipv4_addresses())
    s += (s.empty() ? "" : ", ") + ifname + " " + addr;
  return s.empty() ? "none" : s;
}

// The source address the kernel picks for `host` (UDP connect sends nothing).
std::string route_source(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) {
    throw UsageError("cannot choose the control network: host '" + host +
                     "' does not resolve to an IPv4 address; give --control-net IFACE|CIDR "
                     "(this machine has: " +
                     available() + ")");
  }
  std::string out;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char buf[INET_ADDRSTRLEN];
        if (::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf)) out = buf;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (out.empty() || out == "0.0.0.0") {
    throw UsageError("cannot choose the control network: no route to host '" + host +
                     "'; give --control-net IFACE|CIDR (this machine has: " + available() + ")");
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> local_ipv4_addresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) out.emplace_back(a->ifa_name, buf);
  }
  ::freeifaddrs(list);
  return out;
}

std::string interface_of_address(const std::string& addr) {
  for (const auto& [ifname, a] : local_ipv4_addresses()) {
    if (a == addr) return ifname;
  }
  return "";
}

bool in_cidr(const std::string& addr, const std::string& cidr) {
  const size_t slash = cidr.find('/');
  in_addr net{}, a{};
  if (slash == std::string::npos || !parse_v4(cidr.substr(0, slash), net)) {
    throw UsageError("--control-net: '" + cidr + "' is not an IPv4 CIDR like 10.0.0.0/24");
  }
  const int bits = parse_int(cidr.substr(slash + 1), 0, 32, "--control-net prefix length");
  if (!parse_v4(addr, a)) return false;
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (ntohl(a.s_addr) & mask) == (ntohl(net.s_addr) & mask);
}

ControlAddresses choose_control_addresses(const std::string& control_net,
                                          const std::vector<std::string>& hosts,
                                          const std::vector<bool>& is_local) {
  ControlAddresses out;
  if (!control_net.empty()) {
    const bool cidr = control_net.find('/') != std::string::npos;
    for (const auto& [ifname, addr] : local_ipv4_addresses()) {
      if (cidr ? in_cidr(addr, control_net) : ifname == control_net) {
        out.listen = addr;
        break;
      }
    }
    if (out.listen.empty()) {
      throw UsageError("--control-net " + control_net + ": no IPv4 address of this machine " +
                       (cidr ? "lies in that subnet" : "on that interface") +
                       " (this machine has: " + available() + ")");
    }
    out.connect.assign(hosts.size(), out.listen);
    return out;
  }
  std::string common;
  bool differ = false;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string a = (i < is_local.size() && is_local[i]) ? std::string() : route_source(hosts[i]);
    out.connect.push_back(a);
    if (a.empty()) continue;
    if (common.empty()) common = a;
    if (a != common) differ = true;
  }
  if (common.empty()) common = "127.0.0.1";
  out.listen = differ ? "0.0.0.0" : common;
  for (auto& a : out.connect) {
    if (a.empty()) a = common;  // this machine's daemon reaches any local address
  }
  return out;
}

}  // namespace spark::launch
