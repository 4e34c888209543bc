#include "comm/communicator_impl.hpp"

#include <algorithm>
#include <set>
#include "config/config.hpp"

#include "spark/error.hpp"

namespace spark {

CommOptions CommOptions::from_config(const config::Config& config) {
  CommOptions o;
  o.timeout_ms = config.timeout_ms();
  o.barrier_timeout_ms = config.barrier_timeout_ms();
  o.join_timeout_ms = config.join_timeout_ms();
  o.spin_auto = !config.spin_us().has_value();
  o.spin_us = config.spin_us().value_or(o.spin_us);
  o.transport = config.transport();
  o.tcp_lanes = config.tcp_lanes();
  o.tcp_addr = config.tcp_addr();
  o.data_net = config.value("SPARK_DATA_NET").value_or("");
  o.ib_hca = config.ib_hca();
  o.ib_gid_index = config.ib_gid_index();
  o.rdma_lanes = config.lanes();
  o.job_id = config.job_id().value_or("");
  o.trace_path = config.trace_path();
  o.report_failures = config.abort_on_failure();  // SPARK_ON_FAILURE=abort|raise
  const auto& subsystems = config.log_subsystems();
  o.log_tcp = config.log_level() >= config::LogLevel::info &&
              (subsystems.empty() ||
               std::find(subsystems.begin(), subsystems.end(), "tcp") != subsystems.end());
  return o;
}

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<bootstrap::Bootstrap> boot, CommOptions options)
    : boot_(std::move(boot)), options_(std::move(options)), timeout_ms_(options_.timeout_ms) {
  if (!boot_) throw InvalidUsage("CommunicatorImpl: no bootstrap");
  if (options_.timeout_ms == 0) throw InvalidUsage("timeout must be at least 1 ms");
  if (options_.trace_path) trace_ = std::make_unique<Trace>(*options_.trace_path, boot_->rank());
  wire_up();
  WaitPolicy::Settings wait;
  if (!options_.spin_auto) {
    wait.fixed_spin = std::chrono::microseconds(options_.spin_us);
  } else if (size_ > 1) {
    wait.oversubscribed = cpuset_oversubscribed(local_size_);
    wait.wake_cost = measure_wake_cost();
  }
  wait_policy_ = WaitPolicy(wait);
}

CommunicatorImpl::~CommunicatorImpl() {
  // Destroy transports before the bootstrap (reverse creation order).
  by_peer_.clear();
  transports_.clear();
}

std::string CommunicatorImpl::transport_summary() const {
  if (world_ != this) return world_->transport_summary();
  if (transports_.empty()) return "self";
  std::string s;
  for (const auto& t : transports_) s += (s.empty() ? "" : "+") + std::string(t->name());
  return s;
}

}  // namespace spark
