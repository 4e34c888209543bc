// The ordered executor behind the torch backend's async_op: one per communicator.
//
// torch hands every collective to the backend at call time and expects a Work back at once;
// the operations of one communicator must run in call order (every rank calls them in the
// same order) and never two at a time (a libspark Communicator is used by one thread at a
// time). A progress thread runs them, so async_op=True overlaps them with the caller's work
// (DDP's gradient buckets with the backward pass). A caller that waits on an operation the
// thread has not started yet runs it, and everything queued before it, itself: a synchronous
// call then costs what the operation costs, not a hand-over to another thread and back.
// Handing an operation to a sleeping thread costs a wake-up (a futex syscall, and a thread
// that competes for a core): ~6 us per call on a 2-core machine, more than the collective at
// 1 KiB. So while a group is busy the thread does not sleep for good between operations: it
// looks for work every kPoll, and a submit does not wake it; an operation the caller does not
// wait for starts within kPoll. After kBusyWindow without operations it sleeps until the next
// submit wakes it.
// Torch-free, so it is unit-tested without torch (tests/python/op_queue_test.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace spark::python {

class OpQueue {
 public:
  /// An operation reports its own outcome (a Work's finish, a future); it must not throw.
  using Op = std::function<void()>;
  /// Operations are numbered from 1 in submission order.
  using Ticket = std::uint64_t;

  static constexpr std::chrono::microseconds kPoll{1000};
  static constexpr std::chrono::milliseconds kBusyWindow{1000};

  OpQueue();
  /// Runs what is still queued, then joins the progress thread.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  Ticket submit(Op op);
  /// Returns once the operation `ticket` has run. Runs queued operations in this thread while
  /// none is running, so that a wait right after submit does not wait for the thread to wake.
  void wait(Ticket ticket);
  bool done(Ticket ticket) const;
  /// The ticket of the last operation submitted (0: none).
  Ticket last() const;

 private:
  struct Entry {
    Ticket ticket;
    Op op;
  };
  // Pops the front and runs it with the lock released; the caller holds `lock` and sees
  // running_ false and pending_ non-empty.
  void run_front(std::unique_lock<std::mutex>& lock);
  void progress();

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // an operation finished, or the queue was stopped
  std::condition_variable work_;     // wakes the progress thread
  std::deque<Entry> pending_;
  Ticket submitted_ = 0;
  Ticket finished_ = 0;  // every ticket <= finished_ has run (they run in order)
  bool running_ = false;
  bool thread_idle_ = false;  // the progress thread sleeps on work_ until notified
  std::chrono::steady_clock::time_point last_op_{};  // when an operation last finished
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace spark::python
