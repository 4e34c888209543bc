// The ordered executor behind the torch backend's async_op: one per communicator.
//
// torch hands every collective to the backend at call time and expects a Work back at once;
// the operations of one communicator must run in call order (every rank calls them in the
// same order) and never two at a time (a libspark Communicator is used by one thread at a
// time). Progress threads run them, so async_op=True overlaps them with the caller's work
// (DDP's gradient buckets with the backward pass). A caller that waits on an operation no
// thread has started yet runs it, and everything queued before it, itself: a synchronous
// call then costs what the operation costs, not a hand-over to another thread and back.
//
// Each operation has two parts: `run` (the collective) holds the communicator; `complete`
// (finishing the Work, completing its future, which runs the future's then() callbacks) runs
// after the communicator is free again. A callback may issue another collective on the same
// group and wait for its future (torch's PowerSGD and quantization DDP hooks do); its thread
// is busy in the callback meanwhile, so a second progress thread runs that collective (as
// gloo has two).
//
// Handing an operation to a sleeping thread costs a wake-up (a futex syscall, and a thread
// that competes for a core): ~6 us per call on a 2-core machine, more than the collective at
// 1 KiB. So while a group is busy one thread does not sleep for good between operations: it
// looks for work every kPoll, and a submit does not wake anyone; an operation the caller does
// not wait for starts within kPoll. After kBusyWindow without operations the threads sleep
// until a submit wakes one.
// Torch-free, so it is unit-tested without torch (tests/python/op_queue_test.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

namespace spark::python {

class OpQueue {
 public:
  static constexpr std::chrono::microseconds kPoll{1000};
  static constexpr std::chrono::milliseconds kBusyWindow{1000};
  static constexpr int kThreads = 2;

  /// An operation's parts report their own outcome (a Work's finish, a future); neither may
  /// throw. `complete` may be empty.
  using Op = std::function<void()>;
  /// Operations are numbered from 1 in submission order.
  using Ticket = std::uint64_t;

  /// The queue behind a shared_ptr whose last owner may be one of the queue's own threads (a
  /// future callback that dropped the last Work of a destroyed group): it is then destroyed
  /// on a thread of its own, since a thread cannot join itself.
  static std::shared_ptr<OpQueue> make();

  /// Runs what is still queued, then joins the progress threads. Not from one of them.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  Ticket submit(Op run, Op complete = nullptr);
  /// Returns once the operation `ticket` has run and every earlier one has also completed
  /// (waiting on the last of many finishes all of them, as on a CUDA stream; `ticket`'s own
  /// `complete` may still be running on another thread). A wait from inside a completion (a
  /// future callback waiting on a later operation) does not wait for other completions: its
  /// own is one of them. Runs queued operations in this thread while none is running, so that
  /// a wait right after submit does not wait for a thread to wake.
  void wait(Ticket ticket);
  bool done(Ticket ticket) const;
  /// The ticket of the last operation submitted (0: none).
  Ticket last() const;
  /// Whether the calling thread is one of this queue's progress threads.
  bool is_own_thread() const noexcept;

 private:
  OpQueue();
  struct Entry {
    Ticket ticket;
    Op run;
    Op complete;
  };
  // Pops the front, runs it and then its completion with the lock released; the caller holds
  // `lock` and sees running_ false and pending_ non-empty.
  void run_front(std::unique_lock<std::mutex>& lock);
  void progress();

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // an operation finished, or the queue was stopped
  std::condition_variable work_;     // wakes a progress thread
  std::deque<Entry> pending_;
  Ticket submitted_ = 0;
  Ticket finished_ = 0;               // every ticket <= finished_ has run (they run in order)
  std::multiset<Ticket> completing_;  // tickets whose `complete` runs now (on any thread)
  bool running_ = false;
  int polling_ = 0;   // progress threads looking for work every kPoll (at most one)
  int sleeping_ = 0;  // progress threads asleep until notified
  std::chrono::steady_clock::time_point last_op_{};  // when an operation last finished
  bool stopping_ = false;
  std::thread threads_[kThreads];
};

}  // namespace spark::python
