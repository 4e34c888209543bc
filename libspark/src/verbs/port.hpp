// The device open sequence, written once for the RoCE transport, the doctor probe and the
// verbs tests: device -> port (must be ACTIVE) -> RoCE v2 GID -> PD -> CQ, and the local
// half of an RC endpoint on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "verbs/endpoint.hpp"
#include "verbs/gid.hpp"
#include "verbs/handles.hpp"
#include "verbs/qp.hpp"

namespace spark::verbs {

/// Every device's name, sorted (so that all ranks agree on lane order). Throws VerbsError
/// (no_device_message) when there is none.
std::vector<std::string> device_names();

/// One opened device port. Members in creation order: C++ destroys them in reverse, and a
/// type that adds memory regions derives from it so that those go first.
struct OpenPort {
  std::string name;
  int port = 1;
  Context ctx;
  PortInfo info;
  GidChoice gid;
  ProtectionDomain pd;
  CompletionQueue cq;

  int mtu() const noexcept { return mtu_bytes(info.active_mtu); }
  std::uint32_t ipv4() const noexcept;  ///< the IPv4 inside the GID (host byte order)
};

/// Opens `device`, requires `port` to be ACTIVE, chooses its GID (select_gid, sysfs under
/// `sysfs_root`), allocates a PD and a CQ of `cq_entries`. Throws VerbsError with the fix.
OpenPort open_port(const std::string& device, int port, std::string_view sysfs_root,
                   const std::optional<std::string>& gid_override, int cq_entries);

/// This side's endpoint for `qp` on `p`: the peer may write [addr, addr + bytes) with `mr`.
Endpoint local_endpoint(const OpenPort& p, const QueuePair& qp, const MemoryRegion& mr,
                        const void* addr, std::size_t bytes);

}  // namespace spark::verbs
