#include "op_queue.hpp"

#include <utility>

namespace spark::python {

OpQueue::OpQueue() : thread_([this] { progress(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

OpQueue::Ticket OpQueue::submit(Op op) {
  bool wake = false;
  Ticket ticket = 0;
  {
    std::lock_guard lock(mutex_);
    ticket = ++submitted_;
    pending_.push_back({ticket, std::move(op)});
    wake = thread_idle_;
    thread_idle_ = false;
  }
  if (wake) work_.notify_one();
  return ticket;
}

void OpQueue::run_front(std::unique_lock<std::mutex>& lock) {
  Entry entry = std::move(pending_.front());
  pending_.pop_front();
  running_ = true;
  lock.unlock();
  entry.op();
  entry.op = nullptr;  // the operation's captures (tensors) go before the next one starts
  lock.lock();
  running_ = false;
  finished_ = entry.ticket;
  last_op_ = std::chrono::steady_clock::now();
  changed_.notify_all();
  // The thread may have gone to sleep while a waiter ran this one: work left, or a stop to see.
  if ((!pending_.empty() || stopping_) && thread_idle_) {
    thread_idle_ = false;
    work_.notify_one();
  }
}

void OpQueue::wait(Ticket ticket) {
  std::unique_lock lock(mutex_);
  while (finished_ < ticket) {
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
    if (stopping_ && pending_.empty() && !running_) return;
    if (!stopping_ && std::chrono::steady_clock::now() - last_op_ < kBusyWindow) {
      work_.wait_for(lock, kPoll);  // busy: submit does not wake us (see op_queue.hpp)
      continue;
    }
    thread_idle_ = true;
    work_.wait(lock);
  }
}

}  // namespace spark::python
