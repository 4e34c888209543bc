#include "cuda/proxy.hpp"

#include <chrono>
#include <cstring>
#include <exception>
#include <string>

#include "spark/error.hpp"
#include "spark/kernels/reduce.hpp"

namespace spark::cuda {

namespace sk = spark::kernels;

Proxy::Proxy(const sk::Channel& host_view, Exchange exchange, OnFailure on_failure)
    : ch_(host_view),
      exchange_(std::move(exchange)),
      on_failure_(std::move(on_failure)),
      next_(sk::load_acquire(ch_.stage_flag) + 1) {
  thread_ = std::thread([this] { run(); });
}

Proxy::~Proxy() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

void Proxy::run() noexcept {
  std::uint64_t next = next_;
  std::uint32_t idle = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    if (sk::load_acquire(ch_.stage_flag) >= next) {
      if (!serve(next)) return report();  // failed: the record is in the control block
      ++next;
      idle = 0;
      continue;
    }
    if (sk::is_failed(ch_.ctl)) return report();  // e.g. a kernel's wait expired
    // A kernel may come at any time (graphs replay without the host knowing): poll, hot for a
    // few microseconds after the last operation, then at a cadence that costs little CPU.
    if (++idle < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // Stopped: a record a kernel wrote since the last poll is reported all the same (the group
  // abort must not depend on whether this thread was scheduled before the stop).
  if (sk::is_failed(ch_.ctl)) report();
}

void Proxy::report() noexcept {
  const sk::FailureRecordData* record = sk::published_record(ch_.ctl);
  if (!on_failure_ || record == nullptr) return;
  try {
    on_failure_(*record);
  } catch (...) {
    // Reporting must not take the process down from a background thread.
  }
}

bool Proxy::serve(std::uint64_t seq) {
  const sk::StageDesc desc = *ch_.desc;  // ordered by the acquire of the stage flag
  const std::size_t bytes =
      static_cast<std::size_t>(desc.count) * sk::element_size(static_cast<DType>(desc.dtype));
  sk::FailureSite site;
  site.peer = -1;
  site.seq = seq;
  site.op = "allreduce";
  try {
    if (bytes > ch_.capacity) {
      throw InvalidUsage("device allreduce of " + std::to_string(bytes) +
                         " bytes exceeds the channel capacity");
    }
    exchange_(ch_.stage, ch_.gathered, bytes);
  } catch (const CommFailure& e) {
    // The communicator's wait knows which peer and lane the data did not come from; the
    // sequence number stays the device operation's.
    const FailureRecord& r = e.record();
    const std::string lane(r.lane, strnlen(r.lane, sizeof r.lane));
    const std::string detail =
        "gpu op, host proxy" +
        (r.detail[0] != 0 ? "; " + std::string(r.detail, strnlen(r.detail, sizeof r.detail)) : "");
    site.peer = r.peer;
    site.step = r.step;
    site.lane_name = lane.c_str();
    site.detail = detail.c_str();
    sk::record_failure(ch_.ctl, site, static_cast<std::uint8_t>(r.cause), r.waited_ms, r.timeout_ms,
                       r.time_unix_ns);
    return false;
  } catch (const std::exception& e) {
    const std::string detail = std::string("gpu op, host proxy: ") + e.what();
    site.detail = detail.c_str();
    sk::record_failure(ch_.ctl, site, sk::kCausePeerError, 0,
                       __atomic_load_n(&ch_.ctl->timeout_ms, __ATOMIC_ACQUIRE),
                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
    return false;
  }
  for (int r = 0; r < ch_.size; ++r) {
    for (std::uint32_t lane = 0; lane < ch_.lanes; ++lane) {
      sk::store_release(ch_.peer_flags + static_cast<std::size_t>(r) * ch_.lanes + lane, seq);
    }
  }
  served_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

}  // namespace spark::cuda
