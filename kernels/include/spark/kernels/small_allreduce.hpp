// The one-kernel small allreduce, written once for the GPU (one thread block) and the host
// (tests run it in a thread against plain memory, with the real host proxy).
//
//   1. read this op's sequence number from the control block (not from a launch argument, so
//      a CUDA graph replays with fresh numbers) and fail at once if the communicator failed;
//   2. stage the input into mapped host memory, publish desc + stage flag (the proxy sends);
//   3. wait for every peer's flag on every lane (wait_flag: timeout from the control block,
//      record + trap on expiry);
//   4. reduce in fixed rank order (own data from the input buffer) into the output;
//   5. advance the control block's sequence number.
// An Exec provides tid(), threads(), sync() (block barrier), publish_fence() (make the staged
// bytes visible system-wide) and broadcast(v) (thread 0's value to all threads).
#pragma once

#include <cstdint>

#include "spark/kernels/channel.hpp"
#include "spark/kernels/reduce.hpp"
#include "spark/kernels/wait.hpp"

namespace spark::kernels {

enum class KernelStatus : std::uint8_t { done, failed };

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class T, class Exec, class Clock>
SPARK_HD KernelStatus small_allreduce_body(const Channel& ch, const T* send, T* recv,
                                           std::uint64_t count, DType dtype, ReduceOp op, Exec& ex,
                                           Clock& clock) {
  const unsigned tid = ex.tid();
  const unsigned nthreads = ex.threads();
  std::uint64_t seq = 0;
  if (tid == 0) seq = is_failed(ch.ctl) ? 0 : ch.ctl->device_seq + 1;
  seq = ex.broadcast(seq);
  if (seq == 0) return KernelStatus::failed;

  // Alone (size 1) there is nothing to send: no staging, no proxy, just the copy below.
  if (ch.size > 1) {
    T* stage = reinterpret_cast<T*>(ch.stage);
    for (std::uint64_t i = tid; i < count; i += nthreads) stage[i] = send[i];
    ex.publish_fence();
    ex.sync();
  }

  std::uint64_t ok = 1;
  if (tid == 0 && ch.size > 1) {
    ch.desc->count = count;
    ch.desc->dtype = static_cast<std::uint32_t>(dtype);
    ch.desc->op = static_cast<std::uint32_t>(op);
    store_release(ch.stage_flag, seq);
    for (int r = 0; r < ch.size && ok != 0; ++r) {
      if (r == ch.rank) continue;
      for (std::uint32_t lane = 0; lane < ch.lanes && ok != 0; ++lane) {
        FlagWait w;
        w.flag = ch.peer_flags + static_cast<std::uint64_t>(r) * ch.lanes + lane;
        w.site.peer = r;
        w.site.lane = lane;
        w.site.seq = seq;
        w.site.step = 0;
        w.site.op = "allreduce";
        w.site.detail = "gpu wait";
        if (wait_flag(ch.ctl, w, clock) != WaitStatus::arrived) ok = 0;
      }
    }
  }
  ok = ex.broadcast(ok);
  if (ok == 0) return KernelStatus::failed;

  const std::uint64_t block = count * sizeof(T);
  for (std::uint64_t i = tid; i < count; i += nthreads) {
    recv[i] = reduce_element<T>(op, ch.size, [&](int r) -> T {
      if (r == ch.rank) return send[i];
      return reinterpret_cast<const T*>(ch.gathered + block * static_cast<std::uint64_t>(r))[i];
    });
  }
  ex.sync();
  if (tid == 0) ch.ctl->device_seq = seq;
  return KernelStatus::done;
}

/// Single-threaded host Exec (tests).
struct HostExec {
  unsigned tid() const { return 0; }
  unsigned threads() const { return 1; }
  void sync() {}
  void publish_fence() { __atomic_thread_fence(__ATOMIC_RELEASE); }
  std::uint64_t broadcast(std::uint64_t v) { return v; }
};

}  // namespace spark::kernels
