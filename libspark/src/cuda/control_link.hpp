// A DeviceComm's control block as its communicator sees it, apart from where the block lives
// (host code only, no CUDA): filled from the communicator (rank, current timeout), with the GPU
// waits' grace and the proxy's lane name, and registered as a mirror of the communicator's
// timeout, so that Communicator::set_timeout_ms reaches running kernels and captured graphs
// (every wait re-reads the word, kernels/include/spark/kernels/wait.hpp). DeviceComm keeps the
// block in pinned mapped memory; the host tests (tests/kernels/timeout_link_test.cpp) in
// ordinary memory, and run the same wait on it.
#pragma once

#include <cstdint>
#include <cstring>

#include "comm/communicator_impl.hpp"
#include "spark/kernels/control_block.hpp"

namespace spark::cuda {

/// GPU waits give the proxy (which names the missing peer and lane exactly) this long past
/// the timeout before they record and trap themselves.
inline constexpr std::uint32_t kDeviceGraceMs = 2000;
/// The control block's one lane: the host proxy moves every byte.
inline constexpr char kDeviceLaneName[] = "host-proxy";

/// Registered for its lifetime: destroy it before the block's memory (and the communicator).
class ControlBlockLink {
 public:
  ControlBlockLink(CommunicatorImpl& comm, kernels::ControlBlock* ctl) : comm_(comm), ctl_(ctl) {
    kernels::init_control_block(ctl, comm.rank(), comm.timeout_ms());
    ctl->grace_ms = kDeviceGraceMs;
    ctl->lane_count = 1;
    static_assert(sizeof kDeviceLaneName <= kernels::kLaneNameSize);
    std::memcpy(ctl->lane_names[0], kDeviceLaneName, sizeof kDeviceLaneName);
    // Communicator::set_timeout_ms writes the block's timeout too (graphs see it).
    comm_.add_timeout_mirror(&ctl_->timeout_ms);
  }
  ~ControlBlockLink() { comm_.remove_timeout_mirror(&ctl_->timeout_ms); }
  ControlBlockLink(const ControlBlockLink&) = delete;
  ControlBlockLink& operator=(const ControlBlockLink&) = delete;

 private:
  CommunicatorImpl& comm_;
  kernels::ControlBlock* ctl_;
};

}  // namespace spark::cuda
