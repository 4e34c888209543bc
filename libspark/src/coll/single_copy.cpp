// The single-copy allreduce and reduce_scatter, for ranks of one node whose processes may read
// and write each other's memory (process_vm_readv/writev through the shm transport's
// access_peer). Step 0: every rank tells every peer where its buffers are (and whether it
// reaches every peer); all ranks see all answers, so they agree on falling back. Then the owner
// of chunk r reads chunk r of every peer's input (into a cached piece), folds the n inputs in
// rank order into its own output and writes the result into every peer's output: each region of
// each buffer is touched by its chunk's owner alone, so in place is safe. Step 1: a message to
// every peer says "done with your buffers, my chunk is complete"; a rank returns once every peer
// said so. A rank that fails anywhere in the call, the address exchange included, sends a "left"
// notice instead and returns once every live peer but the one it blames has stopped touching its
// buffers. Two exchanges per call, none per piece: a peer that is not scheduled does not hold the
// others up until the end (the two-phase path hands every piece over, and on a loaded machine each
// hand-off can cost a time slice); each byte is copied once in each direction instead of twice.
// docs/collectives.md, "Algorithms".
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "coll/partition.hpp"
#include "coll/reduce.hpp"
#include "comm/communicator_impl.hpp"
#include "spark/error.hpp"

namespace spark {

using coll::block;
using coll::peer_at;
using coll::Range;

bool CommunicatorImpl::reaches_every_peer_memory() const noexcept {
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && !by_peer_[static_cast<std::size_t>(p)]->can_access_peer(world_rank(p)))
      return false;
  return all_peers_shm_;
}

bool CommunicatorImpl::copy_tuned(std::size_t bytes) const noexcept {
  return all_peers_shm_ && algo_ == AllreduceAlgo::automatic &&
         bytes >= coll::CopyTuner::kMinBytes && peer_memory_reachable_;
}

void CommunicatorImpl::reduce_large(const std::byte* in, std::byte* out, std::size_t count,
                                    DType dtype, ReduceOp op, bool gather) {
  using Path = coll::CopyTuner::Path;
  const std::size_t bytes = count * dtype_size(dtype);
  const auto through_slots = [&] {
    if (gather && one_shot_size(bytes))
      allreduce_one_shot(in, out, count, dtype, op);
    else
      allreduce_two_phase(in, out, count, dtype, op, gather);
  };
  if (!all_peers_shm_ || (algo_ != AllreduceAlgo::automatic && algo_ != AllreduceAlgo::single_copy))
    return through_slots();
  if (algo_ == AllreduceAlgo::single_copy) {
    if (allreduce_single_copy(in, out, count, dtype, op, gather, {true, {}}) != CopyOutcome::copied)
      through_slots();
    return;
  }
  if (!peer_memory_reachable_) return through_slots();
  coll::CopyTuner& tuner = copy_tuners_[gather ? 0 : 1];
  const coll::CopyTuner::Plan plan = tuner.plan(bytes);
  const auto t0 =
      plan.timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  CopyOutcome outcome = CopyOutcome::not_chosen;
  if (plan.path == Path::single_copy)
    outcome = allreduce_single_copy(in, out, count, dtype, op, gather, {true, {}});
  else if (plan.path == Path::decide)
    outcome = allreduce_single_copy(in, out, count, dtype, op, gather, {false, tuner.vote(bytes)});
  else if (!plan.trial && bytes >= single_copy_min_)
    outcome = allreduce_single_copy(in, out, count, dtype, op, gather, {wants_single_copy(), {}});
  if (outcome != CopyOutcome::copied) through_slots();
  // Every rank learnt it in the same exchange: the slots for every size from now on.
  if (outcome == CopyOutcome::unreachable) peer_memory_reachable_ = false;
  if (plan.path == Path::decide) tuner.decided(bytes, outcome == CopyOutcome::copied);
  if (plan.timed) tuner.took(bytes, std::chrono::steady_clock::now() - t0);
}

// reduce_scatter: gather false, `out` is this rank's chunk and nothing is written to peers.
CommunicatorImpl::CopyOutcome CommunicatorImpl::allreduce_single_copy(const std::byte* in,
                                                                      std::byte* out,
                                                                      std::size_t count,
                                                                      DType dtype, ReduceOp op,
                                                                      bool gather, CopyAsk ask) {
  std::vector<CopyBuffers> theirs;
  SingleCopyState state(static_cast<std::size_t>(size_));
  // From the first address sent, a peer may copy from and into these buffers: a failure in
  // the exchange itself is handed off like one in the copy (else the peers that have the
  // addresses copy from buffers the caller may already have freed, and fail with "Bad
  // address" naming this rank instead of the cause).
  // A failure here tells the peers through the "left" notices first (leave_single_copy), then
  // through the transports (leave_peers).
  struct DeferLeave {
    bool& deferred;
    explicit DeferLeave(bool& d) : deferred(d) { deferred = true; }
    ~DeferLeave() { deferred = false; }
  } defer(world_->leave_deferred_);
  try {
    if (const CopyOutcome o = exchange_copy_buffers(in, out, ask, theirs, state);
        o != CopyOutcome::copied)
      return o;
    ++single_copy_calls_;
    fold_own_chunk(in, out, count, dtype, op, gather, theirs);
    finish_single_copy(state);
  } catch (const CommFailure& e) {
    leave_single_copy(e.record().peer, state);
    throw;
  }
  return CopyOutcome::copied;
}

// Whether this rank asks for the single copy in a call the tuner gave the two-phase path: when
// the machine has more of the job's ranks than CPUs and the waits block (a foreign task keeps
// the wait policy from yielding: cpu_price() >= 0.5). Then every piece of the two-phase path
// needs a sleeping peer woken, and the single copy's two hand-offs per call win: torch, 3
// ranks on the 2 CPUs, 16 MiB, 3 alternating runs (2 Dec 08:20 UTC): 8.3-9.6 ms vs 9.4-13.8 ms
// (Gloo 24-30 ms), on a VM whose quiet calls were faster through the slots. The tuner's trials
// ran under whatever load there was then; load changes faster than its rounds, so this
// question stays, asked from single_copy_min_ up (the exchange costs a few us per call).
bool CommunicatorImpl::wants_single_copy() const noexcept {
  const WaitPolicy& policy = world_->wait_policy_;
  return ask_single_copy_ || (policy.oversubscribed() && policy.cpu_price() >= 0.5);
}

CommunicatorImpl::CopyOutcome CommunicatorImpl::exchange_copy_buffers(
    const std::byte* in, const std::byte* out, CopyAsk ask, std::vector<CopyBuffers>& theirs,
    SingleCopyState& state) {
  const std::uint64_t desc_count = op_.call.count;
  bool ok = reaches_every_peer_memory();
  bool wanted = ask.want;
  const CopyBuffers mine{reinterpret_cast<std::uintptr_t>(in),
                         reinterpret_cast<std::uintptr_t>(out), ok ? 1u : 0u, wanted ? 1u : 0u,
                         ask.vote};
  theirs.assign(static_cast<std::size_t>(size_), CopyBuffers{});
  std::vector<coll::CopyTuner::Vote> votes(static_cast<std::size_t>(size_));
  votes[static_cast<std::size_t>(rank_)] = ask.vote;
  post_to_peers(0, 0, &mine, sizeof mine, desc_count);
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    const auto up = static_cast<std::size_t>(p);
    transport::RecvView v = take(p, 0, 0, sizeof mine, desc_count);
    std::memcpy(&theirs[up], v.data, sizeof mine);
    give_back(p);
    state.answered[up] = 1;
    if (theirs[up].reaches_all == 0) ok = false;
    if (theirs[up].wanted != 0) wanted = true;
    votes[up] = theirs[up].vote;
  }
  // A peer that failed in the exchange sent its addresses, then its notice, and may have freed
  // its buffers since: touch none of them.
  for (int i = 1; i < size_; ++i)
    if (const int p = peer_at(rank_, size_, i); peer_left(p)) fail_left(p, 0);
  // Every rank saw every answer: all agree. One rank that asks is enough (its peers would wait
  // for it at every piece of the two-phase path).
  if (!ok) return CopyOutcome::unreachable;
  return wanted || coll::CopyTuner::single_copy_wins(votes) ? CopyOutcome::copied
                                                            : CopyOutcome::not_chosen;
}

void CommunicatorImpl::fold_own_chunk(const std::byte* in, std::byte* out, std::size_t count,
                                      DType dtype, ReduceOp op, bool gather,
                                      const std::vector<CopyBuffers>& theirs) {
  // Pieces of the slot size (256 KiB): the peers' pieces, this rank's input piece and the
  // output piece stay in L2 (2 MiB here) between the read, the fold and the write. Measured
  // beside it, 2 ranks 16 MiB at load 3: 64 KiB and 1 MiB pieces no better, and
  // non-temporal stores of the own output (saving its read before the write) were slower in a
  // one-process model of the fold (2.4-2.7 vs 2.9-3.1 ms per 8 MiB).
  const std::size_t es = dtype_size(dtype), pe = piece_ / es;
  const auto n = static_cast<std::size_t>(size_);
  std::vector<std::byte>& stage = world_->stage_;
  if (stage.size() < (n - 1) * piece_) stage.resize((n - 1) * piece_);
  std::vector<const void*> inputs(n);
  const Range chunk = block(count, size_, rank_);
  std::byte* my_out = gather ? out + chunk.begin * es : out;
  for (std::size_t b = 0; b < chunk.len; b += pe) {
    const std::size_t len = std::min(pe, chunk.len - b), off = (chunk.begin + b) * es;
    for (int i = 1; i < size_; ++i) {
      const int p = peer_at(rank_, size_, i);
      std::byte* piece_in = stage.data() + static_cast<std::size_t>(i - 1) * piece_;
      copy_peer(p, piece_in, theirs[static_cast<std::size_t>(p)].in + off, len * es, false);
      inputs[static_cast<std::size_t>(p)] = piece_in;
    }
    inputs[static_cast<std::size_t>(rank_)] = in + off;
    coll::reduce_n(my_out + b * es, inputs.data(), size_, len, dtype, op);
    if (gather)
      for (int i = 1; i < size_; ++i) {
        const int p = peer_at(rank_, size_, i);
        copy_peer(p, my_out + b * es, theirs[static_cast<std::size_t>(p)].out + off, len * es,
                  true);
      }
  }
}

void CommunicatorImpl::copy_peer(int p, void* local, std::uint64_t remote, std::size_t bytes,
                                 bool write) {
  transport::Transport& t = *by_peer_[static_cast<std::size_t>(p)];
  const int wp = world_rank(p);
  const int err = t.access_peer(wp, local, remote, bytes, write);
  if (err == 0) return;
  std::string detail = std::string("cross-memory ") + (write ? "write to" : "read from") +
                       " rank " + std::to_string(wp) + "'s buffer: " + std::strerror(err);
  if (err == ESRCH)
    fail(FailureCause::peer_closed, p, t.lane_name(wp, transport::WaitKind::data), 0, 0,
         timeout_ms_.load(std::memory_order_relaxed), detail);
  // A live peer whose buffer is gone (EFAULT) left the call early: it failed, most often
  // because another peer died. It sent its notice before it returned, so before the buffer
  // went: fail_left names it as having left, or the dead peer. Without a notice, the dead
  // peer too, as that peer's own record does; the peer that left may have seen the death
  // first (its copy failed once the dead process's memory was gone, before the exit is
  // complete and the pidfd says so): look for 20 ms.
  if (peer_left(p)) fail_left(p, 0);
  fail_naming_exited_peer(p, FailureCause::peer_error, 0, std::move(detail));
}

int CommunicatorImpl::exited_peer(int except, std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    for (int i = 1; i < size_; ++i) {
      const int q = peer_at(rank_, size_, i);
      if (q != except && by_peer_[static_cast<std::size_t>(q)]->peer_state(
                             world_rank(q), nullptr) == transport::PeerState::closed)
        return q;
    }
    if (std::chrono::steady_clock::now() >= until) return -1;
    // An exit is complete (pidfd readable) within about a millisecond of the memory going.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void CommunicatorImpl::finish_single_copy(SingleCopyState& state) {
  const std::uint64_t desc_count = op_.call.count;
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    post(p, 1, 0, nullptr, 0, desc_count);
    state.told[static_cast<std::size_t>(p)] = 1;
  }
  // A peer's "left" notice in place of its step 1 fails the take (fail_left).
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    take(p, 1, 0, 0, desc_count);
    give_back(p);
    state.heard[static_cast<std::size_t>(p)] = 1;
  }
  drain();
}

// Peers may still be reading this rank's input and writing into its output: tell them it left
// (they fail instead of waiting for its chunk, or before they copy), and return only once
// every other live peer has sent a message after its step 0 (its step 1, its own notice, or
// the two-phase fallback's first piece: done with these buffers, or never touching them) or
// exited, bounded by min(timeout, 1 s): the caller may reuse the buffers as soon as the call
// throws. The peer the record names is not waited for (dead, or stopped past the timeout): a
// peer stopped mid-copy may still write when it resumes (docs/collectives.md, "Single copy
// and dead peers").
void CommunicatorImpl::leave_single_copy(int blamed, SingleCopyState& state) {
  const std::uint64_t desc_count = op_.call.count;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min<std::uint32_t>(
                                             timeout_ms_.load(std::memory_order_relaxed), 1000));
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    transport::Transport& t = *by_peer_[static_cast<std::size_t>(p)];
    if (!state.told[static_cast<std::size_t>(p)] && t.can_send(world_rank(p)))
      t.send(world_rank(p), header(kLeftStep, 0, 0, desc_count), nullptr);
  }
  world_->leave_peers();
  for (int i = 1; i < size_; ++i) {
    const int p = peer_at(rank_, size_, i);
    const auto up = static_cast<std::size_t>(p);
    transport::Transport& t = *by_peer_[up];
    const int wp = world_rank(p);
    if (wp == blamed) continue;
    while (!state.heard[up] && t.peer_state(wp, nullptr) == transport::PeerState::ok &&
           std::chrono::steady_clock::now() < until) {
      if (const transport::MsgHeader* h = t.peek(wp).header) {
        // Its step 0, not taken (this rank failed in the exchange): it may be copying behind
        // it; the message after it says when it is done.
        if (state.answered[up] || h->seq != (op_.seq | tag_) || h->step != 0) break;
        t.release(wp);
        state.answered[up] = 1;
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
}

}  // namespace spark
