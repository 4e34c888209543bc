#include <gtest/gtest.h>

#include <csignal>

#include "exit_rules.hpp"

namespace spark::launch {
namespace {

int exited(int code) {
  return (code & 0xff) << 8;
}  // a waitpid status
int signaled(int sig) {
  return sig & 0x7f;
}

TEST(ExitRules, AllZeroIsZero) {
  ExitTracker t;
  EXPECT_FALSE(t.rank_ended(0, 100, exited(0)));
  EXPECT_FALSE(t.rank_ended(1, 101, exited(0)));
  EXPECT_FALSE(t.failed());
  EXPECT_EQ(t.exit_code(), 0);
}

TEST(ExitRules, FirstFailureWins) {
  ExitTracker t;
  EXPECT_FALSE(t.rank_ended(0, 100, exited(0)));
  EXPECT_TRUE(t.rank_ended(2, 102, exited(3)));
  EXPECT_FALSE(t.rank_ended(1, 101, exited(7)));
  EXPECT_FALSE(t.timed_out(5));
  EXPECT_EQ(t.exit_code(), 3);
  EXPECT_NE(t.failure_line().find("rank 2 (pid 102) exited with status 3"), std::string::npos)
      << t.failure_line();
}

TEST(ExitRules, SignalIs128Plus) {
  ExitTracker t;
  EXPECT_TRUE(t.rank_ended(1, 101, signaled(SIGKILL)));
  EXPECT_EQ(t.exit_code(), 128 + SIGKILL);
  EXPECT_NE(t.failure_line().find("signal 9"), std::string::npos) << t.failure_line();
  EXPECT_NE(t.failure_line().find("rank 1"), std::string::npos);
}

TEST(ExitRules, AbortStatus) {
  ExitTracker a;
  EXPECT_TRUE(a.rank_aborted(2, 7, 5, "boom"));
  EXPECT_EQ(a.exit_code(), 5);
  ExitTracker zero;
  zero.rank_aborted(2, 7, 0, "");
  EXPECT_EQ(zero.exit_code(), 1);  // an abort never reads as success
  ExitTracker wraps;
  wraps.rank_aborted(2, 7, 256, "");
  EXPECT_EQ(wraps.exit_code(), 1);
}

TEST(ExitRules, TimeoutStartAndInterrupt) {
  ExitTracker t;
  EXPECT_TRUE(t.timed_out(2.5));
  EXPECT_EQ(t.exit_code(), kExitTimeout);
  EXPECT_NE(t.failure_line().find("2.5"), std::string::npos);
  ExitTracker s;
  EXPECT_TRUE(s.start_failed(1, "/x: No such file or directory"));
  EXPECT_EQ(s.exit_code(), kExitCannotStart);
  EXPECT_EQ(s.failure_line(), "cannot start rank 1: /x: No such file or directory");
  ExitTracker i;
  EXPECT_TRUE(i.interrupted(SIGINT));
  EXPECT_EQ(i.exit_code(), 130);
}

}  // namespace
}  // namespace spark::launch
