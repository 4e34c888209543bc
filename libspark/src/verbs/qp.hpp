// RC queue pairs: creation, the INIT -> RTR -> RTS transitions for RoCE (GRH with the chosen
// GID), RDMA WRITE posting and completion polling with errors turned into text.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "verbs/endpoint.hpp"
#include "verbs/handles.hpp"
#include "verbs/limits.hpp"

namespace spark::verbs {

struct PortInfo {
  ibv_port_state state = IBV_PORT_NOP;
  ibv_mtu active_mtu = IBV_MTU_1024;
  std::uint8_t link_layer = 0;
};

/// ibv_query_port, checked.
PortInfo query_port(const Context& ctx, int port);

/// An RC QP on `pd`, sends completing on `cq`, receives on `recv_cq` (default: `cq` too);
/// sized for `max_send_wr` writes and `max_recv_wr` posted receives.
QueuePair create_rc_qp(const ProtectionDomain& pd, const CompletionQueue& cq, int max_send_wr,
                       const CompletionQueue* recv_cq = nullptr, int max_recv_wr = 1);

/// Brings `qp` to RTS towards `remote`. The local side is `local` (its gid_index/port/psn/mtu
/// are used). Refuses an MTU mismatch (mtu_mismatch text) before touching the QP; a failed
/// transition names the state, device, both GIDs and QPNs.
void connect_rc_qp(QueuePair& qp, const Endpoint& local, const Endpoint& remote, int peer,
                   const QpTimeouts& timeouts);

/// Posts an RDMA WRITE of [laddr, laddr+len) (lkey) to raddr (rkey). Signaled when `signal`.
/// Returns 0 or the errno of ibv_post_send.
[[nodiscard]] int post_write(ibv_qp* qp, std::uint64_t wr_id, const void* laddr, std::uint32_t len,
                             std::uint32_t lkey, std::uint64_t raddr, std::uint32_t rkey,
                             bool signal, bool inline_data = false);
/// The same as an RDMA WRITE WITH IMMEDIATE: it also consumes a receive posted at the peer,
/// whose completion (and completion-channel event) tells the peer that something arrived.
[[nodiscard]] int post_write_imm(ibv_qp* qp, std::uint64_t wr_id, const void* laddr,
                                 std::uint32_t len, std::uint32_t lkey, std::uint64_t raddr,
                                 std::uint32_t rkey, bool signal, bool inline_data,
                                 std::uint32_t imm);
/// Posts one receive without buffers (for WRITE WITH IMMEDIATE). Returns 0 or an errno.
[[nodiscard]] int post_recv(ibv_qp* qp, std::uint64_t wr_id);

/// "transport retry counter exceeded (status 12, vendor error 0x..., wr_id N)".
std::string completion_error(const ibv_wc& wc);

/// A pseudo-random 24-bit PSN.
std::uint32_t random_psn();

}  // namespace spark::verbs
