#include "verbs/handles.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "verbs/limits.hpp"
#include "verbs/verbs_error.hpp"

namespace spark::verbs {

int close_context(ibv_context* c) {
  return ibv_close_device(c);
}
int dealloc_pd(ibv_pd* p) {
  return ibv_dealloc_pd(p);
}
int destroy_cq(ibv_cq* c) {
  return ibv_destroy_cq(c);
}
int dereg_mr(ibv_mr* m) {
  return ibv_dereg_mr(m);
}
int destroy_qp(ibv_qp* q) {
  return ibv_destroy_qp(q);
}
int destroy_comp_channel(ibv_comp_channel* c) {
  return ibv_destroy_comp_channel(c);
}

void log_destroy(const char* call, const std::string& device, int rc) noexcept {
  // Verbs destroy calls return an errno value (or -1 with errno set, in old providers).
  log_destroy_failure(call, device, rc > 0 ? rc : errno);
}

DeviceList::DeviceList(int* err) {
  errno = 0;
  list_ = ibv_get_device_list(&n_);
  if (list_ == nullptr) n_ = 0;
  if (err != nullptr) *err = list_ == nullptr ? (errno != 0 ? errno : ENODEV) : 0;
}

DeviceList::DeviceList(DeviceList&& o) noexcept : list_(o.list_), n_(o.n_) {
  o.list_ = nullptr;
  o.n_ = 0;
}

DeviceList::~DeviceList() {
  if (list_ != nullptr) ibv_free_device_list(list_);
}

ibv_device* DeviceList::find(const std::string& name) const noexcept {
  for (int i = 0; i < n_; ++i) {
    if (name == ibv_get_device_name(list_[i])) return list_[i];
  }
  return nullptr;
}

std::string no_device_message(int list_errno, const std::string& wanted) {
  std::string msg = "no RDMA device found";
  if (!wanted.empty()) msg += " (wanted " + wanted + ")";
  if (list_errno != 0) {
    msg += ": ibv_get_device_list failed: ";
    msg += std::strerror(list_errno);
  } else {
    msg += ": ibv_get_device_list returned no devices";
  }
  msg +=
      ". The kernel has no RDMA support loaded or no RoCE NIC is configured: check "
      "`rdma link` / `ibv_devices`, load the driver (mlx5_ib on a Spark, rdma_rxe for "
      "Soft-RoCE), or run with SPARK_TRANSPORT=tcp";
  return msg;
}

Context open_device(const std::string& name) {
  int err = 0;
  DeviceList list(&err);
  if (list.size() == 0) throw VerbsError(no_device_message(err, name));
  ibv_device* dev = name.empty() ? list[0] : list.find(name);
  if (dev == nullptr) {
    std::string have;
    for (int i = 0; i < list.size(); ++i) {
      have += (i ? ", " : "");
      have += ibv_get_device_name(list[i]);
    }
    throw VerbsError("RDMA device " + name + " not found (present: " + have +
                     "); check SPARK_IB_HCA / SPARK_LANES");
  }
  std::string dev_name = ibv_get_device_name(dev);
  errno = 0;
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) throw_call("ibv_open_device", dev_name, errno ? errno : ENODEV);
  return Context(ctx, dev_name);
}

ProtectionDomain alloc_pd(const Context& ctx) {
  errno = 0;
  ibv_pd* pd = ibv_alloc_pd(ctx.get());
  if (pd == nullptr) throw_call("ibv_alloc_pd", ctx.device(), errno ? errno : ENOMEM);
  return ProtectionDomain(pd, ctx.device());
}

CompletionQueue create_cq(const Context& ctx, int entries, ibv_comp_channel* channel) {
  errno = 0;
  ibv_cq* cq = ibv_create_cq(ctx.get(), entries, nullptr, channel, 0);
  if (cq == nullptr) throw_call("ibv_create_cq", ctx.device(), errno ? errno : ENOMEM);
  return CompletionQueue(cq, ctx.device());
}

CompletionChannel create_comp_channel(const Context& ctx) {
  errno = 0;
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx.get());
  if (ch == nullptr) throw_call("ibv_create_comp_channel", ctx.device(), errno ? errno : ENOMEM);
  CompletionChannel out(ch, ctx.device());
  const int flags = ::fcntl(ch->fd, F_GETFL);
  if (flags < 0 || ::fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    throw_call("fcntl(O_NONBLOCK) on a completion channel", ctx.device(), errno);
  return out;
}

MemoryRegion register_memory(const ProtectionDomain& pd, void* addr, std::size_t bytes) {
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pd.get(), addr, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    int err = errno ? errno : ENOMEM;
    std::string msg =
        call_failed("ibv_reg_mr (" + std::to_string(bytes) + " bytes)", pd.device(), err);
    if (err == ENOMEM || err == EPERM || err == EAGAIN) msg += ". " + memlock_fix_text();
    throw VerbsError(msg);
  }
  return MemoryRegion(mr, pd.device());
}

}  // namespace spark::verbs
