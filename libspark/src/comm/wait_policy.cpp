#include "comm/wait_policy.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace spark {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {
constexpr double kDecay = 1.0 / 32;  // a wait's weight halves after ~22 later waits
constexpr std::uint32_t kProbeEvery = 64;
constexpr auto kLoadInterval = std::chrono::milliseconds(20);
// Yielding: the hold-off after a foreign task was seen doubles from the first to the last
// while tries keep finding one; a yielding period this long without one starts it afresh.
constexpr nanoseconds kFirstHoldoff = milliseconds(100);
constexpr nanoseconds kLastHoldoff = milliseconds(6400);
constexpr nanoseconds kGoodYielding = std::chrono::seconds(1);
// A try looks again after 1 ms, not 20: next to a compiler a try then costs about a time slice,
// not 20 ms of yields (at load 4-5 the 20 ms tries cost 3-rank 1 KiB runs ~20 %). A foreign
// task seen once while not yielding is looked at again as soon (decide_yielding).
constexpr nanoseconds kTrySample = milliseconds(1);
// What a microsecond of yield-polling costs the others: the peer gets the CPU at the next
// yield, so only the yield's own system call (~0.5 us per round) is lost.
constexpr double kYieldPrice = 0.05;

// A decayed weight below this is dropped to 0. Left alone it would sink into the subnormal
// range and stay there (the smallest subnormal times 31/32 rounds back to itself), and every
// later wait would do its arithmetic on subnormals: ~1.5x slower on this AMD host, tens of
// times slower on CPUs that take a microcode assist for them.
constexpr double kNegligible = 1e-9;

double decayed(double x, double keep) {
  x *= keep;
  return std::abs(x) < kNegligible ? 0.0 : x;
}

double us(nanoseconds d) {
  return static_cast<double>(d.count()) / 1000.0;
}
}  // namespace

WaitPolicy::Ns WaitPolicy::bucket_bound(int i) noexcept {
  if (i >= kBuckets - 1) return Ns::max();
  return Ns(250) * (std::int64_t{1} << i);
}

WaitPolicy::WaitPolicy(Settings settings) : settings_(settings) {
  settings_.max_spin = std::max(settings_.max_spin, Ns(0));
  settings_.cpus = std::max(settings_.cpus, 1);
  choose();
}

double WaitPolicy::cpu_price() const noexcept {
  if (yielding_) return kYieldPrice;
  if (settings_.oversubscribed) return 1.0;
  return 0.02 + 0.98 * contention_;
}

WaitPolicy::Ns WaitPolicy::spin_budget() noexcept {
  if (settings_.fixed_spin) return *settings_.fixed_spin;
  ++waits_;
  if (waits_ % kProbeEvery == 0) {
    // Look past the cost model now and then: a history made under blocking only bounds how
    // long the data took, so a longer spin may catch what blocking never could.
    const Ns probe = std::min(settings_.max_spin, std::max(chosen_ * 4, settings_.wake_cost * 2));
    if (probe > chosen_) return probe;
  }
  return chosen_;
}

void WaitPolicy::record(Ns spun, Ns waited, bool blocked) noexcept {
  if (settings_.fixed_spin) return;
  // When the data came: a wait that blocked woke up about one wake-up after it (never before
  // the spin ended, or the spin would have seen it).
  const Ns arrived = blocked ? std::max(spun, waited - settings_.wake_cost) : waited;
  int k = 0;
  while (k < kBuckets - 1 && arrived > bucket_bound(k)) ++k;
  for (double& h : hist_) h = decayed(h, 1.0 - kDecay);
  weight_ = weight_ * (1.0 - kDecay) + 1.0;
  hist_[static_cast<std::size_t>(k)] += 1.0;
  choose();
}

void WaitPolicy::observe_wake(Ns latency) noexcept {
  const double mean = static_cast<double>(settings_.wake_cost.count());
  const double next = mean + (static_cast<double>(latency.count()) - mean) / 8;
  settings_.wake_cost =
      std::clamp(Ns(static_cast<Ns::rep>(next)), Ns(microseconds(1)), Ns(milliseconds(2)));
  if (!settings_.fixed_spin) choose();
}

void WaitPolicy::set_load(Ns now, int runnable_others) noexcept {
  if (runnable_others < 0) {
    next_load_sample_ = now + std::chrono::seconds(1);
    return;
  }
  next_load_sample_ = now + kLoadInterval;
  // 0.5 runnable others per CPU (the peer on a 2-CPU node) costs nothing; 1 and more means
  // a task waits for a CPU, so spinning takes one away from it.
  const double per_cpu = static_cast<double>(runnable_others) / settings_.cpus;
  const double sampled = std::clamp((per_cpu - 0.5) * 2.0, 0.0, 1.0);
  // The median of the last three samples (20 ms apart): one sample that caught a passing task
  // (a kernel worker, the launcher's daemon waking) does not count: taken alone it raised the
  // price to ~0.26, the spin budgets collapsed and the waits of a work-step job blocked (one
  // rank in 241 of 488 waits, 5.3 vs 3.3 us of own time per 1 KiB call). A load that comes and
  // goes sample by sample (ranks sleeping and waking on shared CPUs) counts as half, where the
  // minimum of two consecutive samples read it as none.
  const double a = last_sampled_[0], b = last_sampled_[1];
  const double c = std::max(std::min(a, b), std::min(std::max(a, b), sampled));
  last_sampled_ = {b, sampled};
  contention_ = c + decayed(contention_ - c, 0.75);
  if (settings_.fixed_spin) return;
  decide_yielding(now, runnable_others);
  choose();
}

void WaitPolicy::decide_yielding(Ns now, int runnable_others) noexcept {
  if (!settings_.oversubscribed) return;  // a CPU per rank: nobody to hand one to
  // This job's other ranks account for at most local_ranks - 1 of the runnable others (all of
  // them while they poll), so at least this many runnable tasks are someone else's.
  const int foreign = runnable_others - (settings_.local_ranks - 1);
  const bool seen_before = foreign_seen_;
  foreign_seen_ = foreign >= 1;
  if (foreign >= 1) {
    if (yielding_) {
      yielding_ = false;
      // The first failed try, or one after a good while of yielding, holds off the least.
      holdoff_ = holdoff_ == Ns(0) || now - yield_since_ >= kGoodYielding
                     ? kFirstHoldoff
                     : std::min(holdoff_ * 2, kLastHoldoff);
      yield_again_ = now + holdoff_;
    } else if (seen_before) {
      yield_again_ = std::max(yield_again_, now + std::max(holdoff_, kFirstHoldoff));
    } else {
      // Seen once while blocking: a task passing by (the launcher at start-up, a kernel
      // worker) must not keep the job from yielding for the next 100 ms; look again soon,
      // and hold off only when it is still there.
      next_load_sample_ = now + kTrySample;
    }
  } else if (!yielding_ && now >= yield_again_) {
    yielding_ = true;
    yield_since_ = now;
    next_load_sample_ = now + kTrySample;
  }
}

void WaitPolicy::choose() noexcept {
  if (settings_.fixed_spin) {
    chosen_ = *settings_.fixed_spin;
    return;
  }
  const double price = cpu_price();
  const double wake = us(settings_.wake_cost);
  if (weight_ < 2.0) {
    // No history yet: the classic rule (spin about as long as a block costs) when spinning is
    // cheap; a token spin when it takes someone's CPU.
    chosen_ = std::min(settings_.max_spin,
                       price < 0.5 ? settings_.wake_cost : std::min(settings_.wake_cost, Ns(1000)));
    return;
  }
  // cost(s) = wake * P(wait > s) + price * E[min(wait, s)], per wait, in microseconds.
  double best = wake;  // s = 0: every wait blocks
  Ns best_s{0};
  double below = 0;        // weight of buckets <= k
  double spent_below = 0;  // sum over those of weight * midpoint
  for (int k = 0; k < kBuckets - 1; ++k) {
    const Ns s = bucket_bound(k);
    if (s > settings_.max_spin) break;
    const double h = hist_[static_cast<std::size_t>(k)];
    below += h;
    spent_below += h * us(s) * (k == 0 ? 0.5 : 0.75);
    const double above = std::max(0.0, weight_ - below);
    const double cost = (wake * above + price * (spent_below + above * us(s))) / weight_;
    if (cost < best) {
      best = cost;
      best_s = s;
    }
  }
  chosen_ = best_s;
}

nanoseconds measure_wake_cost() {
  // Ping-pong through one futex word: 1 = main -> helper, 2 = helper -> main, 3 = stop.
  std::atomic<std::uint32_t> word{0};
  auto wait_for = [&](std::uint32_t want) {  // at most 100 ms: init never waits on this long
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(100);
    while (std::chrono::steady_clock::now() < deadline) {
      std::uint32_t v = word.load(std::memory_order_acquire);
      if (v == want || v == 3) return v == want;
      timespec ts{0, 10'000'000};  // a lost wake-up costs 10 ms, never a hang
      syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, v, &ts,
              nullptr, 0);
    }
    return false;
  };
  auto post = [&](std::uint32_t v) {
    word.store(v, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  };
  // Five rounds: the median still drops two outliers (a preempted round on a shared core),
  // and the policy refines the figure from real wake-ups (observe_wake) from the first waits.
  constexpr int kRounds = 5;
  std::vector<nanoseconds> one_way;
  try {
    std::thread helper([&] {
      for (int i = 0; i < kRounds; ++i) {
        if (!wait_for(1)) return;
        post(2);
      }
    });
    for (int i = 0; i < kRounds; ++i) {
      // Let the helper block first: the cost measured is a sleeper's wake-up.
      std::this_thread::sleep_for(microseconds(50));
      const auto t0 = std::chrono::steady_clock::now();
      post(1);
      if (!wait_for(2)) break;
      one_way.push_back((std::chrono::steady_clock::now() - t0) / 2);
      word.store(0, std::memory_order_release);
    }
    post(3);
    helper.join();
  } catch (...) {  // no thread: keep the default
  }
  if (one_way.empty()) return microseconds(20);
  std::nth_element(one_way.begin(), one_way.begin() + static_cast<long>(one_way.size() / 2),
                   one_way.end());
  return std::clamp(one_way[one_way.size() / 2], nanoseconds(microseconds(2)),
                    nanoseconds(microseconds(200)));
}

bool cpuset_oversubscribed(int local_ranks) {
  if (local_ranks > online_cpus()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return false;
  const int mine = CPU_COUNT(&set);
  return mine > 1 && local_ranks > mine;
}

int online_cpus() noexcept {
  return static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

LoadSampler::LoadSampler() : fd_(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)) {}

LoadSampler::~LoadSampler() {
  if (fd_ >= 0) ::close(fd_);
}

int LoadSampler::runnable_others() noexcept {
  if (fd_ < 0) return -1;
  char buf[128];
  const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // "0.52 0.58 0.59 3/512 12345": the fourth field is runnable/total tasks.
  const char* p = buf;
  for (int field = 0; field < 3 && p != nullptr; ++field) {
    p = std::strchr(p, ' ');
    if (p != nullptr) ++p;
  }
  if (p == nullptr) return -1;
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  if (end == p || *end != '/') return -1;
  return static_cast<int>(std::max(0L, running - 1));
}

}  // namespace spark
