// The single wait point and the fail-stop state. Every wait on a peer (data, a free slot,
// outgoing bytes) goes through CommunicatorImpl::wait_slow, which knows peer, lane, op, seq
// and step: that is where a FailureRecord is made.
#include <sched.h>
#include <chrono>
#include <cstring>

#include <algorithm>
#include <thread>

#include "coll/call_desc.hpp"
#include "comm/communicator_impl.hpp"
#include "record_fields.hpp"
#include "spark/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPARK_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define SPARK_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define SPARK_CPU_RELAX() ((void)0)
#endif

namespace spark {

using transport::WaitKind;
using Clock = std::chrono::steady_clock;

void CommunicatorImpl::wait_slow(int peer, WaitKind kind, std::uint32_t step, void* ctx,
                                 bool (*ready)(void*)) {
  transport::Transport& t = *by_peer_[static_cast<std::size_t>(peer)];
  const int wp = world_rank(peer);  // transports know world ranks
  // The world's: every communicator of the rank waits through one policy and its transports.
  WaitPolicy& policy = world_->wait_policy_;
  auto& transports = world_->transports_;
  Trace* trace = world_->trace_.get();
  FlightRecorder* recorder = world_->recorder_.get();
  const auto start = Clock::now();
  // The previous wait's bookkeeping (histogram, cost model), done now that this rank waits
  // anyway: done when that wait ended, it sat between the data's arrival and the next send,
  // on the critical path of every small message (record + choose: ~50-100 ns of ~1 us).
  if (world_->last_wait_.pending) {
    const LastWait& lw = world_->last_wait_;
    policy.record(lw.spun, lw.waited, lw.blocked);
    world_->last_wait_.pending = false;
  }
  // How long to poll before blocking: the wait policy's budget (comm/wait_policy.hpp;
  // SPARK_SPIN_US fixes it). It polls with sched_yield() only when the policy says the CPUs
  // are shared by this job's ranks alone (then a yield hands the CPU to the peer with the
  // data); never next to foreign load: a yield hands the CPU to whatever else is runnable (a
  // compiler) for its whole time slice while we stay runnable without a sleeper's wake-up
  // priority, so one yield can cost milliseconds; a futex/ppoll sleeper is woken by the
  // peer's send and preempts such a task. Measured on the loaded 2-core VM, 1 KiB allreduce,
  // 2 ranks shm (docs/collectives.md): yield-polling 193-1600 us next to two compilers,
  // blocking at once 17-43 us.
  const auto spin_until = start + policy.spin_budget();
  const bool yields = policy.yields();
  Clock::time_point blocked_at{};  // first block (epoch: never blocked)
  const char* what = kind == WaitKind::data     ? "data from"
                     : kind == WaitKind::credit ? "slot at"
                                                : "send to";
  // `end`: when the wait ended. A wait that neither blocked nor yielded passes the clock read
  // of its last spin round (at most kPollsPerClock polls, ~0.1-0.2 us, before the data was
  // seen: within the policy's first bucket), so the data's arrival is not followed by a clock
  // read (~50-60 ns on this VM) before the next send.
  auto traced = [&](Clock::time_point end) {
    const bool blocked = blocked_at != Clock::time_point{};
    world_->last_wait_ = {blocked ? blocked_at - start : end - start, end - start, blocked, true};
    if (recorder) recorder->wait_ended(start, end, blocked);
    if (trace)
      trace->wait(op_.name, op_.seq, step, wp, t.lane_name(wp, kind), what, start, Clock::now());
  };
  // While spinning, several polls per clock read: a read costs twice a pause here, and a poll
  // that comes sooner sees the data sooner. A yielding wait (each poll a system call) and a
  // wait after a block (it returns on a wake-up or at a slice's end) poll once per round.
  constexpr int kPollsPerClock = 4;
  int polls = yields ? 1 : kPollsPerClock;
  Clock::time_point now = start;
  for (;;) {
    for (int i = 1;; ++i) {
      for (auto& tr : transports) tr->progress();
      if (ready(ctx)) {
        traced(blocked_at != Clock::time_point{} || yields ? Clock::now() : now);
        return;
      }
      if (i >= polls) break;
      SPARK_CPU_RELAX();
    }
    now = Clock::now();
    // Read the timeout on every round: set_timeout_ms from another thread applies at once.
    const std::uint32_t timeout =
        op_.barrier ? options_.barrier_timeout_ms : timeout_ms_.load(std::memory_order_relaxed);
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(now - start);
    const auto limit = std::chrono::microseconds(std::uint64_t{timeout} * 1000);
    if (now < spin_until && waited < limit) {
      if (yields) {
        ::sched_yield();
        // A yielding wait never blocks, so it looks at the load here: the first foreign task
        // ends the yielding (next wait).
        if (policy.load_sample_due(now.time_since_epoch()))
          policy.set_load(now.time_since_epoch(), world_->load_sampler_.runnable_others());
      } else {
        SPARK_CPU_RELAX();
      }
      continue;
    }
    polls = 1;
    if (blocked_at == Clock::time_point{}) {
      blocked_at = now;
      // The recorder shows a blocked wait (sparkrun status); one that ends while spinning is
      // not worth a lane name's copy.
      if (recorder)
        recorder->wait_blocked(wp, static_cast<std::uint8_t>(kind), t.lane_name(wp, kind),
                               mid_stream_wait_
                                   ? recorder->lane_row(wp, [&] { return t.lane_index(wp, kind); })
                                   : FlightRecorder::kNoRow,
                               start);
      // About to block anyway: the moment to look at the machine's load now and then.
      if (policy.load_sample_due(now.time_since_epoch()))
        policy.set_load(now.time_since_epoch(), world_->load_sampler_.runnable_others());
    }
    // Blocked: the lanes' busy times for the recorder (at most every 100 ms; a long wait too).
    if (recorder)
      recorder->refresh_busy(now, [&](int p, std::size_t lane) {
        const transport::Transport* pt = world_->by_peer_[static_cast<std::size_t>(p)];
        return pt ? pt->lane_busy(p, lane) : std::chrono::nanoseconds{};
      });
    std::string detail;
    if (t.wait_state(wp, kind, &detail) != transport::PeerState::ok) {
      // Data that arrived before the close is still good: look once more.
      for (auto& tr : transports) tr->progress();
      if (ready(ctx)) {
        traced(Clock::now());
        return;
      }
      traced(Clock::now());
      fail(FailureCause::peer_closed, peer, t.lane_name(wp, kind), step,
           static_cast<std::uint32_t>(waited.count() / 1000), timeout, detail);
    }
    if (waited >= limit) {
      traced(Clock::now());
      const char* why = kind == WaitKind::data ? ""
                        : kind == WaitKind::credit
                            ? "waiting for a free slot: the peer is not receiving"
                            : "waiting to send: the peer is not receiving";
      // The lane name is short (31 characters); the transport may say more (e.g. the
      // relaying host of a relayed tcp lane, docs/fabric.md).
      std::string text = why;
      if (std::string more = t.lane_detail(wp, kind); !more.empty())
        text = text.empty() ? std::move(more) : text + "; " + more;
      fail(FailureCause::timeout, peer, t.lane_name(wp, kind), step,
           static_cast<std::uint32_t>(waited.count() / 1000), timeout, text);
    }
    // Slices of 5 ms, growing to 20 ms once the wait is long (an eighth of the time waited):
    // a 2 s wait wakes ~110 times instead of 400 (each wake-up is a round of progress and
    // health checks; in the Soft-RoCE VM 0.15 s of CPU for 2 s with 5 ms slices). A dead peer
    // or a shortened timeout is still seen within 20 ms; the deadline itself is never passed.
    const auto grown =
        std::clamp(waited / 8, std::chrono::microseconds(5000), std::chrono::microseconds(20000));
    auto slice = std::min(limit - waited, grown);
    // Another transport has bytes queued that someone may depend on: keep it moving.
    for (auto& tr : transports)
      if (tr.get() != &t && tr->has_pending())
        slice = std::min(slice, std::chrono::microseconds(100));
    t.block(wp, kind, slice);
    if (const auto woke = t.take_wake_latency()) policy.observe_wake(*woke);
  }
}

void CommunicatorImpl::fail(FailureCause cause, int peer, const std::string& lane,
                            std::uint32_t step, std::uint32_t waited_ms, std::uint32_t timeout_ms,
                            const std::string& detail) {
  FailureRecord r;
  r.rank = world_->rank_;
  r.peer = peer >= 0 ? world_rank(peer) : peer;
  r.seq = op_.seq;
  r.step = step;
  r.waited_ms = waited_ms;
  r.timeout_ms = timeout_ms;
  r.cause = cause;
  stamp_now(r);
  // A sub-communicator's failure fails the whole rank: the record says where it happened
  // ("comm 1 (color 0, size 2)", then ": " and the detail when there is one).
  const std::string where = world_ == this   ? detail
                            : detail.empty() ? name_
                                             : name_ + ": " + detail;
  set_texts(r, lane, op_.name, where);
  throw CommFailure(world_->commit_failure(r));
}

FailureRecord CommunicatorImpl::commit_failure(const FailureRecord& record) {
  FailureRecord rec;
  {
    std::lock_guard lock(failure_mu_);
    if (!failed_.load(std::memory_order_acquire)) {
      FailureRecord& r = record_;
      r = record;
      failed_.store(true, std::memory_order_release);
      rec = r;
      if (trace_) {
        trace_->failure(to_string(rec));
        trace_->flush();  // before abort: it does not return
      }
      if (recorder_) {
        recorder_->fail_current();
        recorder_->keep();
      }
      if (!leave_deferred_) leave_peers();
      if (options_.report_failures) boot_->abort(1, to_string(rec));
    } else {
      rec = record_;
    }
  }
  return rec;
}

void CommunicatorImpl::leave_peers() noexcept {
  if (told_peers_) return;
  told_peers_ = true;
  // Where the launcher ends the group on this report, the report must come first: sparkrun
  // prints the first one it gets, and the peers' records of this rank leaving would race it.
  if (options_.report_failures && boot_->abort_ends_the_group()) return;
  for (auto& t : transports_) t->leave();
}

std::optional<FailureRecord> CommunicatorImpl::failure() const {
  if (world_ != this) return world_->failure();
  if (!failed_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(failure_mu_);
  return record_;
}

void CommunicatorImpl::check_health() const {
  if (world_ != this) return world_->check_health();
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(failure_mu_);
  throw CommFailure(record_);
}

void CommunicatorImpl::set_timeout_ms(std::uint32_t ms) {
  if (ms == 0) throw InvalidUsage("set_timeout_ms(0): the timeout must be at least 1 ms");
  timeout_ms_.store(ms, std::memory_order_relaxed);
  std::lock_guard lock(mirrors_mu_);
  for (std::uint32_t* w : timeout_mirrors_)
    std::atomic_ref<std::uint32_t>(*w).store(ms, std::memory_order_relaxed);
}

void CommunicatorImpl::add_timeout_mirror(std::uint32_t* word) {
  std::lock_guard lock(mirrors_mu_);
  std::atomic_ref<std::uint32_t>(*word).store(timeout_ms_.load(std::memory_order_relaxed),
                                              std::memory_order_relaxed);
  timeout_mirrors_.push_back(word);
}

void CommunicatorImpl::remove_timeout_mirror(std::uint32_t* word) {
  std::lock_guard lock(mirrors_mu_);
  std::erase(timeout_mirrors_, word);
}

void CommunicatorImpl::fail_external(const FailureRecord& record) noexcept {
  if (world_ != this) return world_->fail_external(record);
  std::lock_guard lock(failure_mu_);
  if (failed_.load(std::memory_order_acquire)) return;
  record_ = record;
  failed_.store(true, std::memory_order_release);
  if (recorder_) {
    recorder_->fail_current();
    recorder_->keep();
  }
  if (trace_) {
    try {
      trace_->failure(to_string(record_));
    } catch (...) {
    }
    trace_->flush();
  }
  if (options_.report_failures) {
    try {
      boot_->abort(1, to_string(record_));
    } catch (...) {  // formatting failed (out of memory): the record stays readable
    }
  }
}

void CommunicatorImpl::begin(const char* name, CallDesc call, bool barrier) {
  check_health();
  op_ = Op{name, ++seq_, call, barrier};
  if (FlightRecorder* r = world_->recorder_.get())
    r->begin(name, recorder_comm_, op_.seq, call.count * dtype_size(static_cast<DType>(call.dtype)),
             call.root);
}

void CommunicatorImpl::begin_p2p(const char* name, CallDesc call, int peer, bool sending) {
  check_health();
  auto& counter = sending ? p2p_send_seq_ : p2p_recv_seq_;
  op_ = Op{name, ++counter[static_cast<std::size_t>(peer)], call, false};
  if (FlightRecorder* r = world_->recorder_.get())
    r->begin(name, recorder_comm_, op_.seq, call.count * dtype_size(static_cast<DType>(call.dtype)),
             world_rank(peer));
}

void CommunicatorImpl::post(int peer, std::uint32_t step, std::uint32_t piece, const void* data,
                            std::size_t bytes, std::uint64_t count_for_peer) {
  transport::Transport& t = *by_peer_[static_cast<std::size_t>(peer)];
  const int wp = world_rank(peer);
  mid_stream_wait_ = piece > 0;
  wait(peer, WaitKind::credit, step, [&] { return t.can_send(wp); });
  mid_stream_wait_ = false;
  send_counted(t, wp, header(step, piece, bytes, count_for_peer), data);
}

transport::MsgHeader CommunicatorImpl::header(std::uint32_t step, std::uint32_t piece,
                                              std::size_t bytes,
                                              std::uint64_t count_for_peer) const noexcept {
  transport::MsgHeader h;
  h.seq = op_.seq | tag_;
  h.step = step;
  h.piece = piece;
  h.bytes = static_cast<std::uint32_t>(bytes);
  CallDesc call = op_.call;
  call.count = count_for_peer;
  h.call = call.bytes();
  return h;
}

transport::RecvView CommunicatorImpl::take(int peer, std::uint32_t step, std::uint32_t piece,
                                           std::size_t bytes, std::uint64_t count_expected) {
  transport::Transport& t = *by_peer_[static_cast<std::size_t>(peer)];
  const int wp = world_rank(peer);
  transport::RecvView v;
  mid_stream_wait_ = piece > 0;
  wait(peer, WaitKind::data, step, [&] {
    v = t.peek(wp);
    return v.header != nullptr;
  });
  mid_stream_wait_ = false;
  const transport::MsgHeader& h = *v.header;
  CallDesc mine = op_.call;
  mine.count = count_expected;
  const CallDesc theirs = CallDesc::from(h.call);
  if ((h.seq & kTagMask) != tag_) {
    fail(FailureCause::mismatch, peer, t.lane_name(wp, WaitKind::data), step, 0,
         timeout_ms_.load(std::memory_order_relaxed),
         "world rank " + std::to_string(wp) + " sent " + describe(theirs) +
             " of another communicator; ranks sharing communicators must call them in one order");
  }
  if (h.seq != (op_.seq | tag_) || !(theirs == mine)) {
    fail(FailureCause::mismatch, peer, t.lane_name(wp, WaitKind::data), step, 0,
         timeout_ms_.load(std::memory_order_relaxed),
         "rank " + std::to_string(wp) + " called " + describe(theirs) + " at seq " +
             std::to_string(h.seq & ~kTagMask) + ", rank " + std::to_string(world_->rank_) +
             " called " + describe(mine) + " at seq " + std::to_string(op_.seq));
  }
  if (h.step != step || h.piece != piece || h.bytes != bytes) {
    if (h.step == kLeftStep) fail_left(peer, step);
    fail(FailureCause::mismatch, peer, t.lane_name(wp, WaitKind::data), step, 0,
         timeout_ms_.load(std::memory_order_relaxed),
         "protocol mismatch: got step " + std::to_string(h.step) + " piece " +
             std::to_string(h.piece) + " (" + std::to_string(h.bytes) + " B), expected step " +
             std::to_string(step) + " piece " + std::to_string(piece) + " (" +
             std::to_string(bytes) + " B); do all ranks use the same settings?");
  }
  return v;
}

bool CommunicatorImpl::peer_left(int peer) {
  const transport::RecvView v = by_peer_[static_cast<std::size_t>(peer)]->peek(world_rank(peer));
  return v.header != nullptr && v.header->step == kLeftStep && v.header->seq == (op_.seq | tag_);
}

void CommunicatorImpl::fail_left(int peer, std::uint32_t step) {
  fail_naming_exited_peer(peer, FailureCause::peer_error, step,
                          "rank " + std::to_string(world_rank(peer)) +
                              " failed in this call and left it (its own record says why)");
}

void CommunicatorImpl::fail_naming_exited_peer(int peer, FailureCause cause, std::uint32_t step,
                                               std::string detail) {
  const std::string lane =
      by_peer_[static_cast<std::size_t>(peer)]->lane_name(world_rank(peer), WaitKind::data);
  if (const int q = exited_peer(peer, std::chrono::milliseconds(20)); q >= 0) {
    detail = "process of rank " + std::to_string(world_rank(q)) + " exited; then " + detail;
    peer = q;
    cause = FailureCause::peer_closed;
  }
  fail(cause, peer, lane, step, 0, timeout_ms_.load(std::memory_order_relaxed), detail);
}

void CommunicatorImpl::drain() {
  for (int p = 0; p < size_; ++p) {
    transport::Transport* t = by_peer_[static_cast<std::size_t>(p)];
    if (t == nullptr) continue;
    const int wp = world_rank(p);
    wait(p, WaitKind::send_done, 0, [&] { return t->send_idle(wp); });
  }
}

}  // namespace spark
