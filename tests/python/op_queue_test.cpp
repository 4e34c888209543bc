// The torch backend's ordered executor (python/src/op_queue.hpp), without torch: call order,
// one operation at a time, a waiting caller running queued operations itself, async progress
// on the threads, completions that wait on later operations, the last owner on a queue
// thread, and a drain on destruction.
#include "op_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace spark::python {
namespace {

using namespace std::chrono_literals;

TEST(OpQueue, RunsInCallOrderOneAtATime) {
  auto qp = OpQueue::make();
  auto& q = *qp;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  OpQueue::Ticket last = 0;
  for (int i = 0; i < 200; ++i) {
    last = q.submit([&, i] {
      if (running.fetch_add(1) != 0) overlapped = true;
      order.push_back(i);
      if (i % 50 == 0) std::this_thread::sleep_for(1ms);
      running.fetch_sub(1);
    });
    if (i % 7 == 0) q.wait(last);  // the caller runs some, the thread others
  }
  q.wait(last);
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_FALSE(overlapped);
}

TEST(OpQueue, ProgressesWithoutAWait) {
  auto qp = OpQueue::make();
  auto& q = *qp;
  std::atomic<bool> ran{false};
  const auto t = q.submit([&] { ran = true; });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!q.done(t) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(ran) << "the progress thread did not run an operation nobody waited on";
}

TEST(OpQueue, ProgressesWithoutAWaitWhileBusy) {
  // After an operation the thread polls instead of sleeping until woken (op_queue.hpp): one
  // submitted then, with no wake and no waiter, still starts within a poll.
  auto qp = OpQueue::make();
  auto& q = *qp;
  q.wait(q.submit([] {}));
  std::atomic<bool> ran{false};
  const auto start = std::chrono::steady_clock::now();
  const auto t = q.submit([&] { ran = true; });
  while (!q.done(t) && std::chrono::steady_clock::now() - start < 5s)
    std::this_thread::sleep_for(100us);
  EXPECT_TRUE(ran);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 100 * OpQueue::kPoll + 100ms);
}

TEST(OpQueue, WaitReturnsAtOnceForAnOperationThatRan) {
  auto qp = OpQueue::make();
  auto& q = *qp;
  const auto t = q.submit([] {});
  q.wait(t);
  EXPECT_TRUE(q.done(t));
  q.wait(t);  // again: no hang
  EXPECT_EQ(q.last(), t);
}

TEST(OpQueue, AnOperationWaitsForTheOneBeforeIt) {
  auto qp = OpQueue::make();
  auto& q = *qp;
  std::atomic<bool> release{false}, first_done{false}, second_saw_first{false};
  q.submit([&] {
    while (!release) std::this_thread::sleep_for(100us);
    first_done = true;
  });
  const auto second = q.submit([&] { second_saw_first = first_done.load(); });
  std::thread waiter([&] { q.wait(second); });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(q.done(second));
  release = true;
  waiter.join();
  EXPECT_TRUE(second_saw_first);
}

TEST(OpQueue, DestructionRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    auto qp = OpQueue::make();
    auto& q = *qp;
    for (int i = 0; i < 50; ++i) q.submit([&] { ++ran; });
  }
  EXPECT_EQ(ran, 50);
}

// torch's PowerSGD DDP hook: a future callback (an operation's completion) issues another
// operation and waits for its future, which only a second thread can complete.
TEST(OpQueue, ACompletionMayWaitForALaterOperation) {
  auto q = OpQueue::make();
  std::atomic<bool> second_completed{false}, first_saw_it{false};
  const auto first =
      q->submit([] {},
                [&] {
                  q->submit([] {}, [&] { second_completed = true; });
                  const auto deadline = std::chrono::steady_clock::now() + 5s;
                  while (!second_completed && std::chrono::steady_clock::now() < deadline)
                    std::this_thread::sleep_for(100us);
                  first_saw_it = second_completed.load();
                });
  q->wait(first);
  const auto deadline = std::chrono::steady_clock::now() + 6s;
  while (!first_saw_it && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(first_saw_it) << "the later operation never completed while a completion waited";
}

// A group destroyed while a callback holds its last Work: the queue's last owner goes on one
// of its own threads, which cannot join itself (make() hands the destruction to another).
TEST(OpQueue, WaitingOnTheLastFinishesTheCompletionsBeforeIt) {
  // The first operation's completion runs long on a progress thread while the caller runs the
  // second itself: waiting on the second returns only after the first has completed.
  auto q = OpQueue::make();
  std::atomic<bool> first_completed{false};
  const auto first = q->submit([] {},
                               [&] {
                                 std::this_thread::sleep_for(std::chrono::milliseconds(200));
                                 first_completed = true;
                               });
  while (!q->done(first)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto second = q->submit([] {});
  q->wait(second);
  EXPECT_TRUE(first_completed);
}

TEST(OpQueue, LastOwnerOnAQueueThread) {
  std::atomic<bool> completed{false};
  {
    auto q = OpQueue::make();
    auto holder = std::make_shared<std::shared_ptr<OpQueue>>(q);
    q->submit([] {},
              [holder, &completed]() mutable {
                holder->reset();  // the last owner, once `q` below is gone
                completed = true;
              });
    q.reset();
  }
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!completed && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(completed);
}

}  // namespace
}  // namespace spark::python
