// Which address the node daemons connect back to (the control plane's interface).
// --control-net IFACE|CIDR picks the launcher's IPv4 address on that interface or in that
// subnet (e.g. the 10 GbE port of a Spark, apart from the CX7 data lanes); without it, the
// launcher's source address on the route to each host (what the kernel would use).
#pragma once

#include <string>
#include <vector>

namespace spark::launch {

struct ControlAddresses {
  std::string listen;                // address to bind ("0.0.0.0" when hosts differ)
  std::vector<std::string> connect;  // per host: the address its daemon connects to
};

/// `hosts`: the names from the host list; `is_local[i]`: host i is this machine (its
/// daemon may use loopback). Throws UsageError with the fix when nothing fits.
ControlAddresses choose_control_addresses(const std::string& control_net,
                                          const std::vector<std::string>& hosts,
                                          const std::vector<bool>& is_local);

/// True when IPv4 `addr` (dotted) lies in `cidr` ("10.1.2.0/24"). Throws UsageError on a
/// malformed CIDR. Exposed for tests.
bool in_cidr(const std::string& addr, const std::string& cidr);

/// This machine's IPv4 addresses: {interface, address}.
std::vector<std::pair<std::string, std::string>> local_ipv4_addresses();

/// The interface that holds IPv4 `addr` on this machine ("lo" for 127.0.0.1); "" when none.
std::string interface_of_address(const std::string& addr);

}  // namespace spark::launch
