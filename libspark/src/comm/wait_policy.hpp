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

  /// When (on the caller's steady clock) the machine's load should be sampled next.
  bool load_sample_due(Ns now) const noexcept { return now >= next_load_sample_; }
  /// A load sample taken at `now`: runnable tasks other than the caller per online CPU
  /// (negative: unknown). >= 1 means someone waits for a CPU, so spinning takes one away.
  void set_load(Ns now, double runnable_per_cpu) noexcept;

  /// Microseconds of someone else's time one microsecond of spinning costs (0.02 .. 1).
  double cpu_price() const noexcept;
  /// The budget the cost model chose last (without probes).
  Ns chosen() const noexcept { return chosen_; }

 private:
  void choose() noexcept;

  Settings settings_;
  std::array<double, kBuckets> hist_{};  ///< decayed weight of recent waits per bucket
  double weight_ = 0;                    ///< sum of hist_
  double contention_ = 0;                ///< decayed fraction of load samples that were >= 1
  Ns chosen_{0};
  Ns next_load_sample_{0};
  std::uint32_t waits_ = 0;
};

/// Block-and-wake cost on this node: the median one-way latency of a few futex ping-pongs
/// between this thread and a helper (about 0.1-1 ms in all). Clamped to [2 us, 200 us].
std::chrono::nanoseconds measure_wake_cost();

/// Whether `local_ranks` ranks share fewer CPUs than that. A rank bound to one CPU is assumed
/// to have it alone (the launcher binds ranks to distinct CPUs, as mpirun does).
bool cpuset_oversubscribed(int local_ranks);

/// Reads the machine's runnable task count from /proc/loadavg (one pread on an open file).
class LoadSampler {
 public:
  LoadSampler();
  ~LoadSampler();
  LoadSampler(const LoadSampler&) = delete;
  LoadSampler& operator=(const LoadSampler&) = delete;
  /// Runnable tasks other than the caller per online CPU; negative when unknown.
  double runnable_per_cpu() noexcept;

 private:
  int fd_ = -1;
  long cpus_ = 1;
};

}  // namespace spark
