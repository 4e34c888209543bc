// The asymmetric fence of the shm wake-up (docs/memory-ordering.md, "shm mailbox"): the
// sender's side of the Dekker pair (store head; load rx_waiting) runs on every message, the
// sleeper's side (store rx_waiting; load head) only before a futex sleep. membarrier(2)'s
// global expedited command lets the rare side pay for both: it runs a full memory barrier on
// every CPU that runs a registered process, so the frequent side needs no fence of its own
// (on x86 a seq_cst store is a locked instruction that drains the store buffer: ~0.1 us of a
// 0.9 us 1 KiB allreduce on 2 ranks).
#pragma once

namespace spark::transport {

/// Registers this process for global expedited membarriers, once; true when it is (the
/// kernel has the command and no seccomp filter forbids it). A rank that is not registered
/// must keep the fence on its own side of every Dekker pair.
bool register_light_fences() noexcept;

/// A full memory barrier on every CPU that runs a registered process, this thread's
/// included. Requires register_light_fences() to have returned true; on an unexpected
/// error it falls back to a local seq_cst fence and returns false.
bool heavy_fence() noexcept;

}  // namespace spark::transport
