// RAII owners for every verbs object. Each owner destroys its object in its destructor,
// logs (never throws) when that fails, and is move-only. Declare them in creation order
// (device list, context, PD, CQ, MR, QP) so that C++ destroys them in reverse order.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <string>
#include <utility>

namespace spark::verbs {

/// Base for the owners: a pointer, the device name (for messages) and a destroy function.
template <typename T, int (*Destroy)(T*), const char* Call>
class Handle {
 public:
  Handle() = default;
  Handle(T* p, std::string device) : p_(p), device_(std::move(device)) {}
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)), device_(std::move(o.device_)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      device_ = std::move(o.device_);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  const std::string& device() const noexcept { return device_; }
  void reset() noexcept;

 private:
  T* p_ = nullptr;
  std::string device_;
};

inline constexpr char kCloseDevice[] = "ibv_close_device";
inline constexpr char kDeallocPd[] = "ibv_dealloc_pd";
inline constexpr char kDestroyCq[] = "ibv_destroy_cq";
inline constexpr char kDeregMr[] = "ibv_dereg_mr";
inline constexpr char kDestroyQp[] = "ibv_destroy_qp";
inline constexpr char kDestroyCompChannel[] = "ibv_destroy_comp_channel";

int close_context(ibv_context* c);
int dealloc_pd(ibv_pd* p);
int destroy_cq(ibv_cq* c);
int dereg_mr(ibv_mr* m);
int destroy_qp(ibv_qp* q);
int destroy_comp_channel(ibv_comp_channel* c);

using Context = Handle<ibv_context, close_context, kCloseDevice>;
using ProtectionDomain = Handle<ibv_pd, dealloc_pd, kDeallocPd>;
using CompletionQueue = Handle<ibv_cq, destroy_cq, kDestroyCq>;
using MemoryRegion = Handle<ibv_mr, dereg_mr, kDeregMr>;
using QueuePair = Handle<ibv_qp, destroy_qp, kDestroyQp>;
/// A completion channel: its fd becomes readable when an armed CQ gets a completion.
using CompletionChannel = Handle<ibv_comp_channel, destroy_comp_channel, kDestroyCompChannel>;

void log_destroy(const char* call, const std::string& device, int rc) noexcept;

template <typename T, int (*Destroy)(T*), const char* Call>
void Handle<T, Destroy, Call>::reset() noexcept {
  if (p_ != nullptr) {
    int rc = Destroy(p_);
    if (rc != 0) log_destroy(Call, device_, rc);
    p_ = nullptr;
  }
}

/// The list from ibv_get_device_list, freed on destruction.
class DeviceList {
 public:
  /// Lists devices; an empty list is not an error here (see open_device for that).
  /// `err` receives errno when libibverbs could not list at all (ENOSYS: no kernel support).
  explicit DeviceList(int* err = nullptr);
  DeviceList(DeviceList&&) noexcept;
  DeviceList& operator=(DeviceList&&) = delete;
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  ~DeviceList();

  int size() const noexcept { return n_; }
  ibv_device* operator[](int i) const noexcept { return list_[i]; }
  /// The device called `name`, or nullptr.
  ibv_device* find(const std::string& name) const noexcept;

 private:
  ibv_device** list_ = nullptr;
  int n_ = 0;
};

/// Opens `name` ("" = the first device). Throws VerbsError when there is no RDMA device at
/// all (message from no_device_message) or no device of that name (naming those present).
Context open_device(const std::string& name);

/// The plain-language text for "no RDMA device": what was seen and how to fix it.
std::string no_device_message(int list_errno, const std::string& wanted);

/// Allocation helpers: each checks the call and throws VerbsError naming call and device.
ProtectionDomain alloc_pd(const Context& ctx);
/// A CQ of `entries`; with `channel`, events for it (after ibv_req_notify_cq) arrive there.
CompletionQueue create_cq(const Context& ctx, int entries, ibv_comp_channel* channel = nullptr);
/// A completion channel whose fd is non-blocking (for poll/ppoll with a timeout).
CompletionChannel create_comp_channel(const Context& ctx);
/// Registers [addr, addr+bytes) for local write and remote write; the error for ENOMEM/EPERM
/// explains RLIMIT_MEMLOCK.
MemoryRegion register_memory(const ProtectionDomain& pd, void* addr, std::size_t bytes);

}  // namespace spark::verbs
