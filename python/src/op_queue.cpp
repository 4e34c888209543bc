#include "op_queue.hpp"

#include <utility>

namespace spark::python {

std::shared_ptr<OpQueue> OpQueue::make() {
  return std::shared_ptr<OpQueue>(new OpQueue, [](OpQueue* q) {
    if (q->is_own_thread()) {
      std::thread([q] { delete q; }).detach();
    } else {
      delete q;
    }
  });
}

OpQueue::OpQueue() {
  for (auto& t : threads_) t = std::thread([this] { progress(); });
}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

bool OpQueue::is_own_thread() const noexcept {
  for (const auto& t : threads_)
    if (t.get_id() == std::this_thread::get_id()) return true;
  return false;
}

OpQueue::Ticket OpQueue::submit(Op run, Op complete) {
  bool wake = false;
  Ticket ticket = 0;
  {
    std::lock_guard lock(mutex_);
    ticket = ++submitted_;
    pending_.push_back({ticket, std::move(run), std::move(complete)});
    wake = polling_ == 0 && sleeping_ > 0;
  }
  if (wake) work_.notify_one();
  return ticket;
}

namespace {
// Set while this thread runs an operation's `complete` (a future's callbacks).
thread_local bool in_completion = false;
}  // namespace

void OpQueue::run_front(std::unique_lock<std::mutex>& lock) {
  Entry entry = std::move(pending_.front());
  pending_.pop_front();
  running_ = true;
  lock.unlock();
  entry.run();
  entry.run = nullptr;  // its captures (tensors) go before the next operation starts
  lock.lock();
  running_ = false;
  finished_ = entry.ticket;
  last_op_ = std::chrono::steady_clock::now();
  changed_.notify_all();
  // This thread goes into the completion (callbacks that may wait on later operations): let
  // another thread take what is queued; and a stop must be seen by a sleeping thread.
  if ((!pending_.empty() || stopping_) && polling_ == 0 && sleeping_ > 0) work_.notify_one();
  if (entry.complete) {
    const auto it = completing_.insert(entry.ticket);
    lock.unlock();
    in_completion = true;
    entry.complete();
    entry.complete = nullptr;  // the Work's last reference may go here (make())
    in_completion = false;
    lock.lock();
    completing_.erase(it);
    changed_.notify_all();
  }
}

void OpQueue::wait(Ticket ticket) {
  std::unique_lock lock(mutex_);
  const bool own_completion = in_completion;
  auto earlier_completing = [&] {
    return !own_completion && !completing_.empty() && *completing_.begin() < ticket;
  };
  while (finished_ < ticket || earlier_completing()) {
    if (!running_ && !pending_.empty()) {
      run_front(lock);
    } else {
      changed_.wait(lock);
    }
  }
}

bool OpQueue::done(Ticket ticket) const {
  std::lock_guard lock(mutex_);
  return finished_ >= ticket;
}

OpQueue::Ticket OpQueue::last() const {
  std::lock_guard lock(mutex_);
  return submitted_;
}

void OpQueue::progress() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!running_ && !pending_.empty()) {
      run_front(lock);
      continue;
    }
    if (stopping_ && pending_.empty()) return;
    // One thread polls while the group is busy (see op_queue.hpp); the other sleeps.
    if (!stopping_ && polling_ == 0 && std::chrono::steady_clock::now() - last_op_ < kBusyWindow) {
      ++polling_;
      work_.wait_for(lock, kPoll);
      --polling_;
    } else {
      ++sleeping_;
      work_.wait(lock);
      --sleeping_;
    }
  }
}

}  // namespace spark::python
