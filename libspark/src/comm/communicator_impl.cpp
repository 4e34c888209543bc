#include "comm/communicator_impl.hpp"

#include <algorithm>
#include <future>
#include <set>
#include <system_error>

#include "coll/reduce.hpp"
#include "log/log.hpp"
#include "spark/error.hpp"

namespace spark {

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<bootstrap::Bootstrap> boot, CommOptions options)
    : boot_(std::move(boot)), options_(std::move(options)), timeout_ms_(options_.timeout_ms) {
  if (!boot_) throw InvalidUsage("CommunicatorImpl: no bootstrap");
  if (options_.timeout_ms == 0) throw InvalidUsage("timeout must be at least 1 ms");
  if (options_.trace_path) trace_ = std::make_unique<Trace>(*options_.trace_path, boot_->rank());
  if (options_.flight_ops > 0)  // before the wire-up: a job stuck in init's barrier shows it
    recorder_ = std::make_unique<FlightRecorder>(
        options_.launcher_rank ? options_.job_id : std::string(),
        options_.launcher_rank.value_or(boot_->rank()), options_.flight_ops);
  // The folds are process-wide: the communicator built last sets their cap (every level gives
  // the same bits, so ranks need not agree on it).
  const coll::CpuIsa isa = coll::limit_fold_isa(options_.max_cpu_isa);
  if (log::enabled(log::Level::info, "wireup"))
    log::line("wireup", "reductions: " + std::string(coll::cpu_isa_name(isa)) + " (at most " +
                            std::string(coll::cpu_isa_name(options_.max_cpu_isa)) +
                            ": SPARK_MAX_CPU_ISA)");
  // The block-and-wake measurement (0.5-4 ms when ranks share cores) runs on its own thread
  // beside the wire-up, which spends most of its time waiting for peers, instead of adding
  // to every rank's start after it. The policy needs the figure only from the first wait.
  std::future<std::chrono::nanoseconds> wake_cost;
  if (options_.spin_auto && boot_->size() > 1) {
    try {
      wake_cost = std::async(std::launch::async, measure_wake_cost);
    } catch (const std::system_error&) {  // no thread: measured after the wire-up
    }
  }
  wire_up();
  if (recorder_)  // per-lane byte counts, by world rank (sub-communicators share these rows)
    for (int p = 0; p < size_; ++p)
      if (const transport::Transport* t = by_peer_[static_cast<std::size_t>(p)])
        recorder_->add_lanes(p, t->lane_names(p));
  WaitPolicy::Settings wait;
  if (!options_.spin_auto) {
    wait.fixed_spin = std::chrono::microseconds(options_.spin_us);
  } else if (size_ > 1) {
    // The machine's ranks against its CPUs; the node's against this rank's cpuset (containers
    // of one kernel may each have CPUs of their own).
    wait.oversubscribed = machine_ranks_ > online_cpus() || cpuset_oversubscribed(local_size_);
    wait.local_ranks = machine_ranks_;
    wait.cpus = online_cpus();
    wait.wake_cost = wake_cost.valid() ? wake_cost.get() : measure_wake_cost();
  }
  wait_policy_ = WaitPolicy(wait);
}

CommunicatorImpl::~CommunicatorImpl() {
  // Destroy transports before the bootstrap (reverse creation order).
  by_peer_.clear();
  transports_.clear();
}

std::string CommunicatorImpl::transport_summary() const {
  // The transports that reach this communicator's members, in the world's order: a
  // sub-communicator of one node says "shm" even when the world also runs tcp, one of a
  // single rank "self".
  std::string s;
  for (const auto& t : world_->transports_)
    if (std::find(by_peer_.begin(), by_peer_.end(), t.get()) != by_peer_.end())
      s += (s.empty() ? "" : "+") + std::string(t->name());
  return s.empty() ? "self" : s;
}

bool CommunicatorImpl::every_peer_over_shm() const noexcept {
  for (int p = 0; p < size_; ++p) {
    const transport::Transport* t = by_peer_[static_cast<std::size_t>(p)];
    if (p != rank_ && (t == nullptr || t->name() != "shm")) return false;
  }
  return true;
}

}  // namespace spark
