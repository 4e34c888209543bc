// The NCCL / Gloo variables for a rank on a Spark (`sparkrun --nccl-env`, `sparkrun topo
// --nccl-env`; docs/roce.md, "NCCL on the same machines"). One rule for both: NCCL_IB_HCA names
// the lanes the binding plan chose (both PCIe halves of a CX7 port: ~24 GB/s busbw instead of
// ~3 with one half), NCCL_IB_GID_INDEX is the IPv4 RoCE v2 GID read from sysfs per device on
// the rank's node (the index differs between nodes and can change), and NCCL_SOCKET_IFNAME /
// GLOO_SOCKET_IFNAME name the control interface (the one the launcher and daemons talk over).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rank_env.hpp"
#include "spark/topo/machine.hpp"

namespace spark::launch {

inline constexpr std::string_view kIbSysfsRoot = "/sys/class/infiniband";

struct NcclEnv {
  /// In this order: NCCL_IB_HCA and NCCL_IB_GID_INDEX (when there are RDMA lanes; with
  /// devices whose GID indices differ NCCL_IB_ROCE_VERSION_NUM=2 and NCCL_IB_ADDR_FAMILY=AF_INET
  /// instead of one index), NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME.
  std::vector<EnvVar> vars;
  std::vector<std::string> notes;  ///< one line each, without the "sparkrun: note: " prefix
};

/// The variables for a rank whose binding plan chose `rank_lanes` (topo::Lane::name) on a node
/// with `machine` lanes. Lanes without an OpenFabrics device are left out of NCCL_IB_HCA; the
/// GID table of each device is read under `ib_root` (port 1: a CX7 RoCE function has one).
/// `control_interface` empty: no socket variables.
NcclEnv nccl_env(const std::vector<topo::Lane>& machine, const std::vector<std::string>& rank_lanes,
                 const std::string& control_interface, std::string_view ib_root = kIbSysfsRoot);

/// The other PCIe halves of `lane` in `machine`: a DGX Spark's CX7 port shows as two PCI
/// functions with the same bus:device.function in two PCI domains (0000:01:00.0 and
/// 0002:01:00.0, rocep1s0f0 and roceP2p1s0f0). Empty when `lane` is whole.
std::vector<std::string> other_halves(const std::vector<topo::Lane>& machine,
                                      const topo::Lane& lane);

/// When `source`=`spec` (the user's HCA list in NCCL syntax: SPARK_IB_HCA or NCCL_IB_HCA) names
/// a PCIe half of a port of `machine` without its other half: "NCCL_IB_HCA=rocep1s0f0 names one
/// PCIe half of ...; name both (...) for full bandwidth (~24 vs ~3 GB/s)". nullopt otherwise,
/// also for a list that names nothing on `machine` (the binding step reports that, when used).
std::optional<std::string> one_half_note(const topo::MachineInfo& machine, std::string_view source,
                                         const std::string& spec);

/// The interface of the IPv4 default route in `proc_root`/net/route; "" when there is none.
std::string default_route_interface(const std::filesystem::path& proc_root = "/proc");

}  // namespace spark::launch
