#include "verbs/qp.hpp"

#include <cerrno>
#include <cstdio>
#include <random>

#include "verbs/verbs_error.hpp"

namespace spark::verbs {

PortInfo query_port(const Context& ctx, int port) {
  ibv_port_attr attr{};
  int rc = ibv_query_port(ctx.get(), static_cast<std::uint8_t>(port), &attr);
  if (rc != 0) throw_call("ibv_query_port(port " + std::to_string(port) + ")", ctx.device(), rc);
  return PortInfo{attr.state, attr.active_mtu, attr.link_layer};
}

QueuePair create_rc_qp(const ProtectionDomain& pd, const CompletionQueue& cq, int max_send_wr,
                       const CompletionQueue* recv_cq, int max_recv_wr) {
  ibv_qp_init_attr init{};
  init.send_cq = cq.get();
  init.recv_cq = recv_cq != nullptr ? recv_cq->get() : cq.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<std::uint32_t>(max_send_wr);
  init.cap.max_recv_wr = static_cast<std::uint32_t>(max_recv_wr);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 64;  // headers and credit words go inline
  init.sq_sig_all = 0;
  errno = 0;
  ibv_qp* qp = ibv_create_qp(pd.get(), &init);
  if (qp == nullptr) throw_call("ibv_create_qp", pd.device(), errno ? errno : ENOMEM);
  return QueuePair(qp, pd.device());
}

namespace {

ibv_mtu to_ibv_mtu(std::uint32_t bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    default:
      return IBV_MTU_4096;
  }
}

[[noreturn]] void transition_failed(const char* state, const Endpoint& local,
                                    const Endpoint& remote, int peer, int rc) {
  throw VerbsError(call_failed(std::string("ibv_modify_qp(") + state + ")", local.device, rc) +
                   "; local " + describe(local) + ", rank " + std::to_string(peer) + " " +
                   describe(remote));
}

}  // namespace

void connect_rc_qp(QueuePair& qp, const Endpoint& local, const Endpoint& remote, int peer,
                   const QpTimeouts& t) {
  if (std::string m = mtu_mismatch(static_cast<int>(local.mtu), static_cast<int>(remote.mtu), peer,
                                   local.device);
      !m.empty()) {
    throw VerbsError(m);
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = local.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ibv_modify_qp(qp.get(), &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    transition_failed("INIT", local, remote, peer, rc);

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = to_ibv_mtu(local.mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;  // RoCE: every packet carries a GRH
  a.ah_attr.grh.dgid = [&] {
    ibv_gid g{};
    std::copy(remote.gid.begin(), remote.gid.end(), g.raw);
    return g;
  }();
  a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(local.gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = local.port;
  if (int rc = ibv_modify_qp(qp.get(), &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    transition_failed("RTR", local, remote, peer, rc);

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = t.timeout;
  a.retry_cnt = t.retry_cnt;
  a.rnr_retry = t.rnr_retry;
  a.sq_psn = local.psn;
  a.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp.get(), &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
    transition_failed("RTS", local, remote, peer, rc);
}

namespace {
int post_one_write(ibv_qp* qp, std::uint64_t wr_id, const void* laddr, std::uint32_t len,
                   std::uint32_t lkey, std::uint64_t raddr, std::uint32_t rkey, bool signal,
                   bool inline_data, const std::uint32_t* imm) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(laddr);
  sge.length = len;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm != nullptr ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (imm != nullptr) wr.imm_data = *imm;
  wr.send_flags = (signal ? IBV_SEND_SIGNALED : 0) | (inline_data ? IBV_SEND_INLINE : 0);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}
}  // namespace

int post_write(ibv_qp* qp, std::uint64_t wr_id, const void* laddr, std::uint32_t len,
               std::uint32_t lkey, std::uint64_t raddr, std::uint32_t rkey, bool signal,
               bool inline_data) {
  return post_one_write(qp, wr_id, laddr, len, lkey, raddr, rkey, signal, inline_data, nullptr);
}

int post_write_imm(ibv_qp* qp, std::uint64_t wr_id, const void* laddr, std::uint32_t len,
                   std::uint32_t lkey, std::uint64_t raddr, std::uint32_t rkey, bool signal,
                   bool inline_data, std::uint32_t imm) {
  return post_one_write(qp, wr_id, laddr, len, lkey, raddr, rkey, signal, inline_data, &imm);
}

int post_recv(ibv_qp* qp, std::uint64_t wr_id) {
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &wr, &bad);
}

std::string completion_error(const ibv_wc& wc) {
  char buf[96];
  std::snprintf(buf, sizeof buf, " (status %d, vendor error 0x%x, wr_id %llu)",
                static_cast<int>(wc.status), wc.vendor_err,
                static_cast<unsigned long long>(wc.wr_id));
  return std::string(ibv_wc_status_str(wc.status)) + buf;
}

std::uint32_t random_psn() {
  std::random_device rd;
  return rd() & 0xffffff;
}

}  // namespace spark::verbs
