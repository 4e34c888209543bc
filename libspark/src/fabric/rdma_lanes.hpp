// RDMA functions as fabric lanes (docs/fabric.md, docs/roce.md). A RoCE lane is one RDMA
// device port; for the map it needs the IPv4 address and subnet of the network interface
// (netdev) it runs on, so that lanes are matched by subnet exactly like tcp lanes. Read from
// sysfs only (no libibverbs), so `sparkrun fabric` works on any build:
//   <ib>/<dev>/ports/<p>/gids/<i>              the GID table ("...:ffff:0a32:0001" = 10.50.0.1)
//   <ib>/<dev>/ports/<p>/gid_attrs/types/<i>   "RoCE v2"
//   <ib>/<dev>/ports/<p>/gid_attrs/ndevs/<i>   the netdev of that GID ("enp1s0f0np0", "d0")
//   <ib>/<dev>/device -> .../0000:01:00.1      PCI function = the QSFP port on a CX7
// The address used is the one the verbs transport uses: the lowest-index IPv4 RoCE v2 GID.
// Its prefix comes from the netdev's addresses (getifaddrs); a GID whose address the netdev
// no longer has (the table lags a change) is not a lane.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fabric/fabric_map.hpp"

namespace spark::fabric {

inline constexpr std::string_view kSysfsInfinibandClass = "/sys/class/infiniband";

/// One IPv4 address of a network interface.
struct NetdevAddress {
  std::string netdev;
  std::uint32_t ipv4 = 0;  ///< host byte order
  int prefix = 32;
  bool operator==(const NetdevAddress&) const = default;
};

/// One RDMA device port that can be a lane.
struct RdmaFunction {
  Lane lane;           ///< name = device, port = PCI function (else the verbs port), netdev IPv4
  std::string netdev;  ///< the interface the address belongs to
  int ib_port = 1;     ///< verbs port number
  int gid_index = -1;  ///< the IPv4 RoCE v2 GID the address came from
};

/// Up IPv4 addresses of every interface (loopback excluded), from getifaddrs.
std::vector<NetdevAddress> netdev_addresses();

/// Every RDMA device port under `ib_root` (normally /sys/class/infiniband) with an IPv4 RoCE
/// v2 GID whose address one of `addresses` carries, sorted by device name then port. Devices
/// without such a GID are left out (`skipped`, when given, gets one line each saying why).
std::vector<RdmaFunction> rdma_functions(std::string_view ib_root,
                                         const std::vector<NetdevAddress>& addresses,
                                         std::vector<std::string>* skipped = nullptr);

/// SPARK_LANES / SPARK_IB_HCA syntax: "dev[,dev...]" ("dev:1" accepted). Strict: throws
/// spark::ConfigError naming `what` for "", ",", "^dev", "=dev", "dev:2", odd characters.
std::vector<std::string> parse_rdma_devices(std::string_view text, std::string_view what);

/// This node's RDMA lanes for the map: rdma_functions() on /sys/class/infiniband, restricted
/// to `devices` (empty: all; a named device that is not a lane throws ConfigError) and to
/// `nets` (as SPARK_DATA_NET; empty: all).
std::vector<Lane> local_rdma_lanes(const std::vector<std::string>& devices,
                                   const std::vector<std::pair<std::uint32_t, int>>& nets,
                                   std::string_view ib_root = kSysfsInfinibandClass);

/// Which lanes a node publishes for the map: RDMA functions (transport roce), network
/// interfaces (tcp), or automatic: RDMA functions when the node has any, else interfaces.
enum class LaneKind { automatic, rdma, net };
/// `devices` (parsed SPARK_LANES / SPARK_IB_HCA) restricts RDMA lanes only.
std::vector<Lane> node_lanes(LaneKind kind, const std::vector<std::string>& devices,
                             const std::vector<std::pair<std::uint32_t, int>>& nets,
                             std::string_view ib_root = kSysfsInfinibandClass);

}  // namespace spark::fabric
