// An in-process allgather with a deadline, standing in for the communicator's allgather in
// tests of the host proxy (host-only and on a GPU).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "spark/error.hpp"

namespace spark::test {

/// In-process allgather among `size` ranks. A rank that does not arrive within the deadline
/// makes the others throw CommFailure naming it (as the communicator's wait does).
class Hub {
 public:
  Hub(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout), round_(size) {}

  void exchange(int rank, const void* in, void* out, std::size_t bytes) {
    std::unique_lock lock(mu_);
    const std::uint64_t n = round_[rank]++;
    Round& r = rounds_[n];
    if (r.in.empty()) r.in.assign(size_, nullptr);
    r.in[rank] = in;
    ++r.arrived;
    cv_.notify_all();
    const auto start = std::chrono::steady_clock::now();
    while (r.arrived < size_) {
      if (cancelled_) throw spark::Error("hub cancelled");
      const std::chrono::milliseconds timeout = timeout_;  // set_timeout() applies at once
      if (cv_.wait_until(lock, start + timeout) == std::cv_status::timeout && r.arrived < size_) {
        spark::FailureRecord rec;
        rec.rank = rank;
        for (int p = 0; p < size_; ++p) {
          if (r.in[p] == nullptr) {
            rec.peer = p;
            break;
          }
        }
        rec.seq = n + 1;
        rec.waited_ms = static_cast<std::uint32_t>(timeout.count());
        rec.timeout_ms = rec.waited_ms;
        std::strcpy(rec.lane, "hub");
        std::strcpy(rec.op, "allgather");
        throw spark::CommFailure(rec);
      }
    }
    for (int p = 0; p < size_; ++p) {
      std::memcpy(static_cast<std::byte*>(out) + bytes * p, r.in[p], bytes);
    }
    ++r.departed;
    cv_.notify_all();
    while (r.departed < size_ && !cancelled_) cv_.wait(lock);  // inputs stay valid till all copied
  }

  /// Also for the exchanges waiting now (counted from their start, as if set before).
  void set_timeout(std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu_);
    timeout_ = timeout;
    cv_.notify_all();
  }

  /// How many ranks have entered the exchange of sequence number `seq` (1, 2, ...).
  int arrived(std::uint64_t seq) {
    std::lock_guard lock(mu_);
    const auto it = rounds_.find(seq - 1);
    return it == rounds_.end() ? 0 : it->second.arrived;
  }

  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }

 private:
  struct Round {
    std::vector<const void*> in;
    int arrived = 0, departed = 0;
  };
  int size_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::uint64_t> round_;
  std::map<std::uint64_t, Round> rounds_;
  bool cancelled_ = false;
};

}  // namespace spark::test
