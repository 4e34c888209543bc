// The communicator's internals: transports per peer, sequence numbers, the single wait point
// and the fail-stop state. Collective algorithms live in coll/collectives.cpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "coll/call_desc.hpp"
#include "coll/copy_tuner.hpp"
#include "coll/partition.hpp"
#include "comm/flight_recorder.hpp"
#include "comm/trace.hpp"
#include "comm/wait_policy.hpp"
#include "spark/communicator.hpp"
#include "spark/config/options.hpp"
#include "spark/failure.hpp"
#include "spark/types.hpp"
#include "transport/transport.hpp"

namespace spark {

/// libspark's own way in (its CUDA layer, its tests): not in the public headers.
class CommunicatorAccess {
 public:
  static CommunicatorImpl& impl(Communicator& comm) noexcept { return *comm.impl_; }
};
namespace internal {
inline CommunicatorImpl& impl(Communicator& comm) noexcept {
  return CommunicatorAccess::impl(comm);
}
}  // namespace internal

class CommunicatorImpl {
 public:
  /// Wires up transports through `boot` and returns after a CPU-side barrier.
  CommunicatorImpl(std::unique_ptr<bootstrap::Bootstrap> boot, CommOptions options);
  ~CommunicatorImpl();
  CommunicatorImpl(const CommunicatorImpl&) = delete;
  CommunicatorImpl& operator=(const CommunicatorImpl&) = delete;

  /// Collective over this communicator (an allgather of color and key, bounded by its
  /// timeout): ranks with the same color >= 0 form a new communicator, ordered by key, then by
  /// rank here; a negative color gets nullptr. The new one borrows the world's transports and
  /// fail-stop state (comm/split.cpp) and must be destroyed before the world communicator.
  std::unique_ptr<CommunicatorImpl> split(int color, int key);
  /// The same ranks in the same order, with their own sequence numbers (collective).
  std::unique_ptr<CommunicatorImpl> dup();
  /// "world", or e.g. "comm 1 (color 0, size 2)", "comm 1.2 (dup, size 2)": names it in
  /// failure records.
  const std::string& name() const noexcept { return name_; }
  /// The world rank of this communicator's rank `r`.
  int world_rank(int r) const noexcept {
    return members_.empty() ? r : members_[static_cast<std::size_t>(r)];
  }

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }
  std::string node_id() const { return node_id_; }
  /// "shm", "tcp", "shm+tcp" or "self": what this rank uses to reach its peers.
  std::string transport_summary() const;
  bootstrap::Bootstrap& bootstrap() noexcept { return *world_->boot_; }

  // collectives (coll/collectives.cpp)
  void allreduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op);
  void allgather(const void* send, void* recv, std::size_t send_count, DType dtype);
  void broadcast(void* buffer, std::size_t count, DType dtype, int root);
  void alltoall(const void* send, void* recv, std::size_t count, DType dtype);
  void alltoallv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                 void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs,
                 DType dtype);
  void send(const void* buffer, std::size_t count, DType dtype, int peer);
  void recv(void* buffer, std::size_t count, DType dtype, int peer);
  void barrier();

  // fail-stop
  std::optional<FailureRecord> failure() const;
  void check_health() const;
  void set_timeout_ms(std::uint32_t ms);
  std::uint32_t timeout_ms() const noexcept { return timeout_ms_.load(std::memory_order_relaxed); }
  /// Marks the communicator FAILED with a record made elsewhere (e.g. a GPU kernel's wait or
  /// the device proxy) and applies the report policy. The first record wins; no-op after.
  void fail_external(const FailureRecord& record) noexcept;
  /// Extra places that set_timeout_ms also writes (e.g. a word in pinned memory that device
  /// waits read, so captured graphs see the new timeout). The pointer must stay valid until
  /// removed; writes are relaxed 32-bit stores.
  void add_timeout_mirror(std::uint32_t* word);
  void remove_timeout_mirror(std::uint32_t* word);
  /// Whether failures are reported via Bootstrap::abort (see CommOptions::report_failures).
  void set_report_failures(bool on) noexcept { options_.report_failures = on; }

  /// The SPARK_TRACE writer, or nullptr. current_seq(): the last operation's sequence number.
  Trace* trace() noexcept { return world_->trace_.get(); }
  /// The SPARK_FLIGHT_RECORDER ring (the world's, shared by every communicator), or nullptr.
  FlightRecorder* recorder() noexcept { return world_->recorder_.get(); }
  std::uint64_t current_seq() const noexcept { return op_.seq; }

  // tuning / measurement
  void set_allreduce_algo(AllreduceAlgo algo) noexcept { algo_ = algo; }
  /// Messages up to this many bytes use the one-shot allreduce (measured, docs/collectives.md).
  /// Like set_allreduce_algo, every rank must use the same value (else: a mismatch failure).
  void set_one_shot_max_bytes(std::size_t bytes) noexcept { one_shot_max_ = bytes; }
  std::size_t one_shot_max_bytes() const noexcept { return one_shot_max_; }
  /// The measured crossover (docs/collectives.md, "Algorithms") for `size` ranks that reach
  /// each other over the network (tcp, roce) or over shared memory only. Every rank computes
  /// it from the same facts (node ids, SPARK_TRANSPORT), so all of them choose alike.
  static constexpr std::size_t one_shot_crossover(bool network, int size) noexcept {
    if (network) return size == 2 ? 256 * 1024 : 32 * 1024;
    // shm, 2 ranks, paired at load 4-5: 32 KiB one-shot 0.81x the two-phase time (6/6 pairs),
    // 64 KiB 1.01x back to back but about 0.7x with a work step before each call (one
    // hand-off instead of two, each a wake-up when the peer sleeps), 128 KiB even both ways;
    // 3 ranks receive twice the data per rank in one-shot: 16 KiB.
    return size == 2 ? 64 * 1024 : 16 * 1024;
  }
  /// Bytes per message (<= the transports' slot size; every rank must use the same value).
  /// Smaller pieces keep the data in flight inside the caches; for measurements.
  void set_piece_bytes(std::size_t bytes) noexcept {
    piece_ = std::clamp<std::size_t>(bytes & ~std::size_t{63}, 64, max_piece_);
  }
  std::size_t piece_bytes_setting() const noexcept { return piece_; }
  /// Allreduces and reduce_scatters of this communicator that took the single-copy path (the
  /// others fell back or were not eligible); for tests and measurements.
  std::uint64_t single_copy_calls() const noexcept { return single_copy_calls_; }
  /// The automatic choice of the large path of allreduce (gather) or reduce_scatter; tests
  /// drive it (every rank alike, as the calls would).
  coll::CopyTuner& copy_tuner(bool gather) noexcept { return copy_tuners_[gather ? 0 : 1]; }
  /// This rank asks for the single copy in every large call the tuner gives the two-phase path
  /// from single_copy_min_, as a rank whose CPUs are contended does (wants_single_copy); tests.
  void ask_single_copy(bool on) noexcept { ask_single_copy_ = on; }
  /// Allreduces of this communicator that took the one-shot path; for tests and measurements.
  std::uint64_t one_shot_calls() const noexcept { return one_shot_calls_; }
  /// This rank may read and write every peer's memory (cross-memory attach, tested when the
  /// shm transport attached): its part of the single-copy agreement (coll/collectives.cpp).
  bool reaches_every_peer_memory() const noexcept;
  /// Whether a message to `peer` would go out now, without waiting for a slot; for tests that
  /// fill a stopped peer's mailbox.
  bool can_post(int peer) {
    return by_peer_[static_cast<std::size_t>(peer)]->can_send(world_rank(peer));
  }
  /// Smallest allgather (bytes per rank) and broadcast that follow the ring of direct links
  /// when the fabric map is not fully connected (docs/fabric.md); SIZE_MAX: never (relay).
  /// Every rank must use the same values; for measurements and tests.
  void set_ring_min_bytes(std::size_t allgather, std::size_t broadcast) noexcept {
    ring_min_bytes_ = allgather;
    ring_bcast_min_bytes_ = broadcast;
  }

 private:
  /// The operation in progress (for headers and failure records).
  struct Op {
    const char* name = "";
    std::uint64_t seq = 0;
    CallDesc call;
    bool barrier = false;  ///< waits use the barrier timeout
  };

  // --- messaging built on the wait point (comm/wait.cpp) ---
  /// Sends one message (a credit is there) and counts its payload on its lane in the flight
  /// recorder (sparkrun status's per-lane bytes): a load and a store, no clock, no call into
  /// the transport unless the peer has several lanes.
  void send_counted(transport::Transport& t, int world_peer, const transport::MsgHeader& h,
                    const void* data) {
    FlightRecorder* r = world_->recorder_.get();
    if (r == nullptr) return t.send(world_peer, h, data);
    const std::uint32_t row = r->lane_row(
        world_peer, [&] { return t.lane_index(world_peer, transport::WaitKind::credit); });
    t.send(world_peer, h, data);
    r->sent(row, h.bytes);
  }
  /// Waits for a credit to `peer`, then sends one piece.
  void post(int peer, std::uint32_t step, std::uint32_t piece, const void* data, std::size_t bytes,
            std::uint64_t count_for_peer);
  /// One message to a peer: its payload and the element count the peer's call should have.
  struct Outgoing {
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::uint64_t count_for_peer = 0;
  };
  /// Posts piece `piece` of `step` to every peer that `to(peer)` gives a message
  /// (std::optional<Outgoing>; nullopt: none this round), those with a free slot first: a rank
  /// whose mailbox at one peer is full (that peer stopped) still feeds the others, which then
  /// wait on the stopped peer and name it in their records, not this rank (fault_test
  /// OneShotFeedsTheOtherPeersFirst). Each peer's messages keep their order.
  template <class To>
  void post_to_peers(std::uint32_t step, std::uint32_t piece, To&& to) {
    std::vector<int> full;  // allocates only when a mailbox is full
    for (int i = 1; i < size_; ++i) {
      const int p = coll::peer_at(rank_, size_, i);
      const std::optional<Outgoing> m = to(p);
      if (!m) continue;
      if (can_post(p))
        send_counted(*by_peer_[static_cast<std::size_t>(p)], world_rank(p),
                     header(step, piece, m->bytes, m->count_for_peer), m->data);
      else
        full.push_back(p);
    }
    for (const int p : full) {
      const Outgoing m = *to(p);
      post(p, step, piece, m.data, m.bytes, m.count_for_peer);
    }
  }
  /// The same message to every peer (post_to_peers).
  void post_to_peers(std::uint32_t step, std::uint32_t piece, const void* data, std::size_t bytes,
                     std::uint64_t count_for_peer) {
    post_to_peers(step, piece, [&](int) {
      return std::optional<Outgoing>(Outgoing{data, bytes, count_for_peer});
    });
  }
  /// The header of this op's message (post's; also sent without waiting where a failed call
  /// still tells its peers, coll/collectives.cpp).
  transport::MsgHeader header(std::uint32_t step, std::uint32_t piece, std::size_t bytes,
                              std::uint64_t count_for_peer) const noexcept;
  /// Waits for the next message from `peer` and checks that it belongs to this op/step/piece.
  /// A "left" notice (kLeftStep) there fails the call naming its sender (fail_left).
  transport::RecvView take(int peer, std::uint32_t step, std::uint32_t piece, std::size_t bytes,
                           std::uint64_t count_expected);
  /// The step of a "left" notice: its sender failed in the current call and stopped touching
  /// its peers' buffers (a failed single copy sends it, coll/single_copy.cpp). Whichever
  /// receive of the call finds it, the single copy's or a two-phase fallback's, fails.
  static constexpr std::uint32_t kLeftStep = ~std::uint32_t{0};
  /// Whether the next message from `peer` is its "left" notice of the current call.
  bool peer_left(int peer);
  /// Fails naming `peer`, which left the current call, or the peer whose exit made it leave
  /// when one has exited (looked for 20 ms): a rank that left most often saw a death first.
  [[noreturn]] void fail_left(int peer, std::uint32_t step);
  /// Fails naming `peer` with `cause` and `detail`, unless another peer's process has exited
  /// (looked for 20 ms): then that one, peer_closed, its exit in front of the detail.
  [[noreturn]] void fail_naming_exited_peer(int peer, FailureCause cause, std::uint32_t step,
                                            std::string detail);
  void give_back(int peer) { by_peer_[static_cast<std::size_t>(peer)]->release(world_rank(peer)); }
  /// Waits until every send of this op has left the process.
  void drain();

  /// The current wait is for a piece after a step's first (post, take): its blocked time
  /// counts against the lane (the flight recorder's per-lane blocked time, the slow-lane
  /// warning). A step's first piece also waits for the peer's own work, which lands on
  /// whichever lane the step starts on.
  bool mid_stream_wait_ = false;
  /// THE wait point: every wait on a peer goes through here.
  template <class Ready>
  void wait(int peer, transport::WaitKind kind, std::uint32_t step, Ready&& ready) {
    if (ready()) return;
    wait_slow(peer, kind, step, &ready, [](void* r) { return (*static_cast<Ready*>(r))(); });
  }
  void wait_slow(int peer, transport::WaitKind kind, std::uint32_t step, void* ctx,
                 bool (*ready)(void*));
  [[noreturn]] void fail(FailureCause cause, int peer, const std::string& lane, std::uint32_t step,
                         std::uint32_t waited_ms, std::uint32_t timeout_ms,
                         const std::string& detail);
  void begin(const char* name, CallDesc call, bool barrier = false);
  void begin_p2p(const char* name, CallDesc call, int peer, bool sending);
  std::size_t piece_bytes() const noexcept { return piece_; }

  // algorithms (coll/collectives.cpp)
  void allreduce_one_shot(const std::byte* in, std::byte* out, std::size_t count, DType dtype,
                          ReduceOp op);
  void allreduce_two_phase(const std::byte* in, std::byte* out, std::size_t count, DType dtype,
                           ReduceOp op, bool gather);
  /// Whether the copy tuner chooses the path of an allreduce or reduce_scatter of `bytes`:
  /// automatic, every peer over shm and reachable, from CopyTuner::kMinBytes.
  bool copy_tuned(std::size_t bytes) const noexcept;
  /// The automatic choice's size rule for the one-shot allreduce (one_shot_max_).
  bool one_shot_size(std::size_t bytes) const noexcept {
    return algo_ == AllreduceAlgo::automatic && bytes <= one_shot_max_;
  }
  /// The allreduce (gather) or reduce_scatter the one-shot does not take: the single copy or
  /// the slots (one-shot or two-phase), as the algorithm setting or (copy_tuned) the copy
  /// tuner says. Every rank plans alike (coll/copy_tuner.hpp), so all of them enter
  /// allreduce_single_copy's address exchange or none.
  void reduce_large(const std::byte* in, std::byte* out, std::size_t count, DType dtype,
                    ReduceOp op, bool gather);
  /// What all_peers_shm_ holds, from by_peer_ (comm/communicator_impl.cpp).
  bool every_peer_over_shm() const noexcept;
  // the single copy (coll/single_copy.cpp)
  /// What this rank says in the single copy's address exchange: it asks for the copy, and
  /// (the tuner's deciding call) its timings.
  struct CopyAsk {
    bool want = false;
    coll::CopyTuner::Vote vote;
  };
  enum class CopyOutcome : std::uint8_t { copied, unreachable, not_chosen };
  /// Cross-memory attach: after agreeing with every peer, copied; or unreachable (some rank
  /// cannot reach some peer's memory) or not_chosen (no rank asked, the votes chose the
  /// two-phase path), and the caller runs the two-phase path.
  CopyOutcome allreduce_single_copy(const std::byte* in, std::byte* out, std::size_t count,
                                    DType dtype, ReduceOp op, bool gather, CopyAsk ask);
  /// Step 0: where a rank's buffers are, whether it reaches every peer's memory, what it asks.
  struct CopyBuffers {
    std::uint64_t in, out;
    std::uint32_t reaches_all;  ///< this rank reaches every peer's memory
    std::uint32_t wanted;       ///< this rank asks for the single copy (CopyAsk::want)
    coll::CopyTuner::Vote vote;
  };
  /// This rank's hand-offs cost sleeps: the machine has more of the job's ranks than CPUs and
  /// its waits block (WaitPolicy::cpu_price()).
  bool wants_single_copy() const noexcept;
  /// Which peers' step 0 this rank took (answered), which it told "done" (step 1 sent) and
  /// heard "done" from, in the current call.
  struct SingleCopyState {
    explicit SingleCopyState(std::size_t n) : answered(n, 0), told(n, 0), heard(n, 0) {}
    std::vector<char> answered, told, heard;
  };
  /// Step 0 with every peer; every rank sees every answer, so all agree on the outcome (copied:
  /// go on with the copy). Fails when a peer has already left the call (its notice follows
  /// its step 0).
  CopyOutcome exchange_copy_buffers(const std::byte* in, const std::byte* out, CopyAsk ask,
                                    std::vector<CopyBuffers>& theirs, SingleCopyState& state);
  /// Reads this rank's chunk of every peer's input, folds it in rank order and (gather) writes
  /// the result into every peer's output.
  void fold_own_chunk(const std::byte* in, std::byte* out, std::size_t count, DType dtype,
                      ReduceOp op, bool gather, const std::vector<CopyBuffers>& theirs);
  /// One cross-memory copy with peer `p`; a failure names the dead peer when there is one.
  void copy_peer(int p, void* local, std::uint64_t remote, std::size_t bytes, bool write);
  /// A peer other than `except` whose process has exited, looked for until `within` has
  /// passed (1 ms sleeps); -1: none.
  int exited_peer(int except, std::chrono::milliseconds within);
  /// Step 1: "done with your buffers" to every peer, then every peer's.
  void finish_single_copy(SingleCopyState& state);
  /// The failure hand-off, wherever the call failed (the exchange included): peers not told
  /// yet get the "left" notice; waits until the live peers but `blamed` (the world rank the
  /// record names) are done with this rank's buffers (bounded), so the caller may reuse them
  /// once it throws.
  void leave_single_copy(int blamed, SingleCopyState& state);
  // ring algorithms over ring_ (coll/ring.cpp): pure data movement, so results stay bitwise
  // the same as the direct algorithms'
  bool use_ring(std::size_t bytes) const noexcept;
  bool use_broadcast_ring(std::size_t bytes) const noexcept;
  void allgather_ring(const std::byte* own, std::byte* out, std::size_t send_count, DType dtype);
  void broadcast_ring(std::byte* buf, std::size_t count, DType dtype, int root);

  void wire_up();  // comm/wireup.cpp
  /// Peers no RDMA WRITE probe reached (auto): over tcp instead, with rank 0's note.
  /// Whether some pair of the job fell back (the same answer on every rank).
  bool fall_back_to_tcp(const transport::Setup& base, std::chrono::milliseconds join);
  /// A sub-communicator of `parent` over `members` (world ranks, in rank order); comm/split.cpp.
  CommunicatorImpl(CommunicatorImpl& parent, std::vector<int> members, int rank, std::string path,
                   std::string label, std::string name);
  std::unique_ptr<CommunicatorImpl> make_sub(int color, int key, bool dup);
  /// Takes the group-wide first failure (the world's): records, traces and reports it once;
  /// returns the record that won.
  FailureRecord commit_failure(const FailureRecord& record);
  /// Tells the peers this rank failed (Transport::leave on the world's transports), unless
  /// the launcher ends the group on the report (Bootstrap::abort_ends_the_group). The single
  /// copy defers it (leave_deferred_) until its "left" notices are out: they say more.
  void leave_peers() noexcept;
  bool leave_deferred_ = false;  ///< the world's: a single copy is under way
  bool told_peers_ = false;      ///< leave_peers() did its work

  /// Sub-communicators share the world's connections: per peer pair one FIFO of messages
  /// carries every communicator's traffic, in the order both ranks call them. world_ owns the
  /// transports, the trace and the fail-stop state (this for the world itself); members_
  /// maps ranks to world ranks (empty: identity); tag_ (high 16 bits of every message's seq,
  /// 0 for the world) lets a receiver tell another communicator's message from its own.
  static constexpr std::uint64_t kTagMask = ~std::uint64_t{0} << 48;
  CommunicatorImpl* world_ = this;
  std::vector<int> members_;
  std::uint64_t tag_ = 0;
  std::string path_;   ///< "" for the world, "1/0", "1/0.2/1": split indices and colors (the tag)
  std::string label_;  ///< "" for the world, "1", "1.2": split indices (the name)
  std::string name_ = "world";
  std::uint32_t splits_ = 0;        ///< splits and dups made from this communicator
  std::vector<std::string> nodes_;  ///< node id per rank of this communicator

  std::unique_ptr<bootstrap::Bootstrap> boot_;
  CommOptions options_;
  std::unique_ptr<Trace> trace_;              ///< written when destroyed (after the transports)
  std::unique_ptr<FlightRecorder> recorder_;  ///< the world's; nullptr: SPARK_FLIGHT_RECORDER=0
  std::uint16_t recorder_comm_ = 0;           ///< this communicator's name in the recorder
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  /// The world's ranks on this rank's machine (bootstrap::ranks_sharing_machine): with the
  /// node's, those of other "hosts" on the same kernel (network namespaces, containers). Set
  /// for the world only (its wait policy serves every communicator).
  int machine_ranks_ = 1;
  std::string node_id_;
  std::vector<std::unique_ptr<transport::Transport>> transports_;
  std::vector<transport::Transport*> by_peer_;  ///< nullptr for self
  std::size_t piece_ = 256 * 1024;              ///< bytes per message
  std::size_t max_piece_ = 256 * 1024;          ///< min slot_bytes over transports
  std::vector<std::uint64_t> p2p_send_seq_, p2p_recv_seq_;
  std::uint64_t seq_ = 0;
  Op op_;
  AllreduceAlgo algo_ = AllreduceAlgo::automatic;
  std::size_t one_shot_max_ = 16 * 1024;  ///< set at wire-up from the measured crossover
  /// From here up, calls the tuner gave the two-phase path still ask each other whether a rank
  /// wants the single copy for its contended CPUs (coll/single_copy.cpp, wants_single_copy).
  std::size_t single_copy_min_ = 4 << 20;
  /// The automatic choice of the large path, per collective (allreduce, reduce_scatter).
  coll::CopyTuner copy_tuners_[2];
  /// Until a single copy's exchange says some rank cannot reach some peer's memory (every rank
  /// hears it in the same call): whether the tuners still choose.
  bool peer_memory_reachable_ = true;
  bool ask_single_copy_ = false;  ///< ask_single_copy()
  /// Every peer of this communicator is reached over shm (one node): set once its transports
  /// are known (end of wire_up; a sub-communicator from its members' transports, split.cpp).
  bool all_peers_shm_ = false;
  std::uint64_t single_copy_calls_ = 0;
  std::uint64_t one_shot_calls_ = 0;
  std::vector<std::byte> stage_;  ///< the world's: peers' pieces read for the single-copy fold
  /// Rank ring over direct links when the fabric map is not fully connected (docs/fabric.md);
  /// empty otherwise. Identical on every rank. Set at wire-up; used by coll/ring.cpp.
  std::vector<int> ring_;
  std::size_t ring_min_bytes_ = 64 * 1024;  ///< below: relay (one hop more beats n-1 steps)
  /// A broadcast chain pays n-1 hops of pipeline fill: measured on the netns 4-ring the relay
  /// was faster at 1 MiB, the chain at 8 MiB (docs/fabric.md, Figures).
  std::size_t ring_bcast_min_bytes_ = 4 << 20;

  WaitPolicy wait_policy_;  ///< spin budgets of the wait point (comm/wait_policy.hpp)
  /// The last wait's outcome, told to wait_policy_ when the next wait starts (comm/wait.cpp:
  /// off the path between a message's arrival and the next send).
  struct LastWait {
    WaitPolicy::Ns spun{0}, waited{0};
    bool blocked = false;
    bool pending = false;
  };
  LastWait last_wait_;
  LoadSampler load_sampler_;  ///< the machine's runnable tasks, for the policy's CPU price

  std::atomic<std::uint32_t> timeout_ms_;
  mutable std::mutex mirrors_mu_;
  std::vector<std::uint32_t*> timeout_mirrors_;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  FailureRecord record_{};
};

}  // namespace spark
