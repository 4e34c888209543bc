// The host proxy of the one-kernel device collectives: a thread that watches a Channel's
// stage flag, moves the staged bytes to every peer and back (an allgather through the
// communicator, so transports, mismatch checks and the communicator's own fail-stop wait are
// reused), and publishes each peer's flag for the waiting kernel.
//
// No CUDA in here: the Channel is plain (pinned, mapped) host memory, so the proxy is tested
// on machines without a GPU together with the kernel body run on the host.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

#include "spark/kernels/channel.hpp"

namespace spark::cuda {

class Proxy {
 public:
  /// An allgather of `bytes` bytes per rank: `out` receives size blocks, block r from rank r.
  /// Throws spark::CommFailure (its record is copied into the control block) or any
  /// std::exception (recorded as a peer error) when the peers cannot be reached.
  using Exchange = std::function<void(const void* in, void* out, std::size_t bytes)>;

  /// Called once, from the proxy thread, when the control block turns failed (written by a
  /// kernel, by this proxy, or by anyone else), at the latest when the proxy is destroyed: the
  /// place to report the group abort.
  using OnFailure = std::function<void(const kernels::FailureRecordData&)>;

  /// `host_view` is the Channel with host addresses. The thread starts at once.
  Proxy(const kernels::Channel& host_view, Exchange exchange, OnFailure on_failure = nullptr);
  /// Stops and joins the thread. An exchange in progress ends with its own deadline; a failure
  /// recorded by then and not yet reported is reported first.
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// Operations served so far.
  std::uint64_t served() const noexcept { return served_.load(std::memory_order_acquire); }

 private:
  void run() noexcept;
  void report() noexcept;
  bool serve(std::uint64_t seq);

  kernels::Channel ch_;
  Exchange exchange_;
  OnFailure on_failure_;
  std::uint64_t next_;  ///< first sequence number to serve (fixed before the thread starts)
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> served_{0};
  std::thread thread_;
};

}  // namespace spark::cuda
