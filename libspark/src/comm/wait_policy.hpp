// The wait policy: how long a wait polls hot before it blocks (futex, ppoll, a completion
// channel). One policy serves every transport; the wait point (comm/wait.cpp) asks it for a
// spin budget when a wait starts and tells it how the wait went when it ends.
//
// Why adaptive: no fixed spin wins everywhere (docs/collectives.md, "Waiting"). With a core per
// rank a long spin turns 16 KiB shm allreduces from 17-30 us into 4 us; when ranks share cores
// the same spin steals the CPU the peer needs, and across hosts on this machine spinning at all
// doubled the time. So the policy prices both choices from what it knows:
//   - the recent waits (a decaying histogram of how long data took to come: a wait that
//     blocked counts as `waited - wake_cost`, never less than what it spun),
//   - what a block-and-wake costs on this node (measured at init, measure_wake_cost()),
//   - what spinning costs others: nearly nothing with a spare CPU, a microsecond per
//     microsecond when the rank's cpuset is oversubscribed or the machine has more runnable
//     tasks than CPUs (sampled from /proc/loadavg, LoadSampler),
// and picks the spin budget s (0 or a bucket bound, at most max_spin) that minimises
//     wake_cost * P(wait > s) + cpu_price * E[min(wait, s)].
// Every 64th wait probes a longer budget, so a history made under blocking can find out that
// spinning would have caught the data (it breaks the "both sides block, every message needs a
// wake-up" cycle measured on the loaded VM).
//
// Polling with sched_yield() (yields()): when the node has more ranks than CPUs and the load
// samples say the runnable tasks are this job's ranks alone, a yield hands the CPU to a peer
// (the one with the data to send), which is cheaper than a futex sleep and wake-up; so the
// policy then polls with yields, priced as a spare CPU. Next to any other runnable task
// (a compiler) a yield can hand the CPU away for a whole time slice, so the first sample that
// shows one ends the yielding, and the policy tries again only after a hold-off that doubles
// (0.1 s .. 6.4 s) while the foreign load stays. Before a try, one sample that shows a
// foreign task is checked 1 ms later, and only a second one holds the try off: the launcher
// still running as the job starts kept half of the 3-rank 1 KiB runs blocking for their first
// 100 ms (27-35 us per call instead of 7).
//
// The policy reads no clock and makes no system call: tests feed it recorded or synthetic
// wait histories with a fake clock (tests/libspark/wait_policy_test.cpp).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

namespace spark {

/// What the policy knows about the node (and SPARK_SPIN_US).
struct WaitSettings {
  std::optional<std::chrono::nanoseconds> fixed_spin;  ///< SPARK_SPIN_US: no adaptation
  std::chrono::nanoseconds wake_cost = std::chrono::microseconds(20);  ///< measure_wake_cost
  std::chrono::nanoseconds max_spin = std::chrono::microseconds(200);  ///< CPU cap per wait
  bool oversubscribed = false;  ///< more ranks than CPUs in this rank's cpuset
  int local_ranks = 1;  ///< this job's ranks on the machine's CPUs (other namespaces' included)
  int cpus = 1;         ///< the machine's online CPUs (what /proc/loadavg counts over)
};

class WaitPolicy {
 public:
  using Ns = std::chrono::nanoseconds;

  using Settings = WaitSettings;

  /// Histogram buckets: (0, 250 ns], (250, 500 ns], ... doubling up to 512 us, then longer.
  static constexpr int kBuckets = 13;
  /// Upper bound of bucket i (the last bucket has none: Ns::max()).
  static Ns bucket_bound(int i) noexcept;

  explicit WaitPolicy(Settings settings = Settings());

  /// How long the next wait polls before it blocks.
  Ns spin_budget() noexcept;
  /// A wait ended: it polled `spun` (== `waited` when it never blocked), took `waited` in all.
  void record(Ns spun, Ns waited, bool blocked) noexcept;

  /// A real wake-up's latency (a blocked wait woken by its peer: Transport::take_wake_latency).
  /// The block-and-wake cost the budgets weigh follows these (a decaying mean, 1 us .. 2 ms),
  /// from the init-time measurement: on a VM a vCPU that slept long wakes far slower than
  /// the ping-pong of two busy threads at init says.
  void observe_wake(Ns latency) noexcept;

  /// When (on the caller's steady clock) the machine's load should be sampled next.
  bool load_sample_due(Ns now) const noexcept { return now >= next_load_sample_; }
  /// A load sample taken at `now`: the machine's runnable tasks other than the caller
  /// (LoadSampler; negative: unknown). More than one per CPU means someone waits for a CPU, so
  /// spinning takes one away; more than this job's other ranks means a foreign task runs.
  void set_load(Ns now, int runnable_others) noexcept;

  /// Whether waits poll with sched_yield() (the node is oversubscribed by this job's ranks
  /// alone) rather than with a pause instruction.
  bool yields() const noexcept { return yielding_; }
  /// More of the job's ranks than CPUs on this machine (Settings::oversubscribed).
  bool oversubscribed() const noexcept { return settings_.oversubscribed; }

  /// Microseconds of someone else's time one microsecond of spinning costs (0.02 .. 1).
  double cpu_price() const noexcept;
  /// The budget the cost model chose last (without probes).
  Ns chosen() const noexcept { return chosen_; }
  /// The decayed weight of recent waits per bucket (tests look at it).
  const std::array<double, kBuckets>& histogram() const noexcept { return hist_; }

 private:
  void choose() noexcept;
  void decide_yielding(Ns now, int runnable_others) noexcept;

  Settings settings_;
  std::array<double, kBuckets> hist_{};   ///< decayed weight of recent waits per bucket
  double weight_ = 0;                     ///< sum of hist_
  double contention_ = 0;                 ///< decayed fraction of load samples that were >= 1
  std::array<double, 2> last_sampled_{};  ///< the two load samples before (median of three)
  Ns chosen_{0};
  Ns next_load_sample_{0};
  std::uint32_t waits_ = 0;
  bool yielding_ = false;
  Ns yield_again_{0};          ///< no yielding before this (a foreign task was seen)
  Ns yield_since_{0};          ///< when the current yielding began
  Ns holdoff_{0};              ///< the last hold-off after a try found a foreign task (0: none yet)
  bool foreign_seen_ = false;  ///< the last load sample showed a foreign task
};

/// Block-and-wake cost on this node: the median one-way latency of a few futex ping-pongs
/// between this thread and a helper (about 0.1-1 ms in all). Clamped to [2 us, 200 us].
std::chrono::nanoseconds measure_wake_cost();

/// Whether `local_ranks` ranks share fewer CPUs than that. A rank bound to one CPU is assumed
/// to have it alone (the launcher binds ranks to distinct CPUs, as mpirun does).
bool cpuset_oversubscribed(int local_ranks);

/// The node's online CPUs (at least 1).
int online_cpus() noexcept;

/// Reads the machine's runnable task count from /proc/loadavg (one pread on an open file).
class LoadSampler {
 public:
  LoadSampler();
  ~LoadSampler();
  LoadSampler(const LoadSampler&) = delete;
  LoadSampler& operator=(const LoadSampler&) = delete;
  /// Runnable tasks other than the caller (an instant count); negative when unknown.
  int runnable_others() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace spark
