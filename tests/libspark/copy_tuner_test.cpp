// The copy tuner's plans and decisions (coll/copy_tuner.hpp), driven with made-up call times.
#include "coll/copy_tuner.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace spark::coll {
namespace {

using Path = CopyTuner::Path;
using std::chrono::microseconds;

constexpr std::size_t k256K = 256 * 1024;
constexpr int kBlock = CopyTuner::kTrials + 1;

// Plays one round for `bytes`: every timed call of the two-phase path takes `two_phase`, of the
// single copy `single` (the first call of each block, untimed, is slower still).
CopyTuner::Vote play_round(CopyTuner& t, std::size_t bytes, microseconds two_phase,
                           microseconds single) {
  for (int i = 0; i < 2 * kBlock; ++i) {
    const CopyTuner::Plan p = t.plan(bytes);
    EXPECT_EQ(p.path, i < kBlock ? Path::slots : Path::single_copy) << "call " << i;
    EXPECT_EQ(p.timed, i % kBlock != 0) << "call " << i;
    EXPECT_TRUE(p.trial) << "call " << i;
    if (p.timed) t.took(bytes, p.path == Path::slots ? two_phase : single);
  }
  const CopyTuner::Plan decide = t.plan(bytes);
  EXPECT_EQ(decide.path, Path::decide);
  EXPECT_TRUE(decide.trial);
  return t.vote(bytes);
}

TEST(CopyTuner, ARoundTimesEachPathThenTheCallAfterDecides) {
  CopyTuner t;
  const CopyTuner::Vote v = play_round(t, k256K, microseconds(30), microseconds(18));
  EXPECT_EQ(v.slots_ns, 30000u);
  EXPECT_EQ(v.single_copy_ns, 18000u);
}

TEST(CopyTuner, TheVoteIsEachPathsFastestCall) {
  CopyTuner t;
  // Two-phase calls: 40, 31 (a preemption), 900, 33, 35 us; single copy: warming up 70, 50, 25.
  const std::vector<int> two_phase = {40, 31, 900, 33, 35}, single = {70, 50, 25, 26, 27};
  for (int i = 0; i < 2 * kBlock; ++i) {
    const CopyTuner::Plan p = t.plan(k256K);
    if (!p.timed) continue;
    const int trial = i % kBlock - 1;
    t.took(k256K, microseconds(p.path == Path::slots ? two_phase[trial] : single[trial]));
  }
  ASSERT_EQ(t.plan(k256K).path, Path::decide);
  EXPECT_EQ(t.vote(k256K).slots_ns, 31000u);
  EXPECT_EQ(t.vote(k256K).single_copy_ns, 25000u);
}

TEST(CopyTuner, APathWithoutATimedCallGivesNoVote) {
  CopyTuner t;
  for (int i = 0; i < 2 * kBlock; ++i) {
    const CopyTuner::Plan p = t.plan(k256K);
    if (p.timed && p.path == Path::slots) t.took(k256K, microseconds(30));  // none for the copy
  }
  ASSERT_EQ(t.plan(k256K).path, Path::decide);
  EXPECT_EQ(t.vote(k256K).slots_ns, 30000u);
  EXPECT_EQ(t.vote(k256K).single_copy_ns, 0u);
  EXPECT_FALSE(CopyTuner::single_copy_wins({t.vote(k256K), t.vote(k256K)}));
}

TEST(CopyTuner, SingleCopyWinsWhenEveryRankVotedAndTheRanksTogetherSaySo) {
  using V = CopyTuner::Vote;
  EXPECT_TRUE(CopyTuner::single_copy_wins({V{30, 20}, V{31, 19}}));
  EXPECT_FALSE(CopyTuner::single_copy_wins({V{20, 30}, V{19, 31}}));
  // One rank far ahead on the two-phase path outweighs a small lead of the other.
  EXPECT_FALSE(CopyTuner::single_copy_wins({V{30, 29}, V{10, 40}}));
  EXPECT_FALSE(CopyTuner::single_copy_wins(
      {V{30, 30}, V{30, 30}}));  // a tie: the two-phase path, which asks nothing per call
  // A rank without a vote (it had no timings) keeps every rank on the two-phase path.
  EXPECT_FALSE(CopyTuner::single_copy_wins({V{30, 20}, V{}}));
  EXPECT_FALSE(CopyTuner::single_copy_wins({}));
}

TEST(CopyTuner, TheDecisionHoldsUntilTheNextRoundThenRoundsComeLessOften) {
  CopyTuner t;
  play_round(t, k256K, microseconds(30), microseconds(18));
  t.decided(k256K, true);
  for (std::uint32_t i = 0; i < CopyTuner::kFirstRetune; ++i) {
    const CopyTuner::Plan p = t.plan(k256K);
    ASSERT_EQ(p.path, Path::single_copy) << "call " << i << " after the first decision";
    ASSERT_FALSE(p.timed || p.trial);
  }
  // The second round: now the two-phase path is faster.
  play_round(t, k256K, microseconds(20), microseconds(25));
  t.decided(k256K, false);
  for (std::uint32_t i = 0; i < CopyTuner::kRetuneEvery; ++i)
    ASSERT_EQ(t.plan(k256K).path, Path::slots) << "call " << i << " after the second";
  play_round(t, k256K, microseconds(20), microseconds(25));
}

TEST(CopyTuner, SizeClassesAreTunedApart) {
  CopyTuner t;
  play_round(t, k256K, microseconds(30), microseconds(18));
  t.decided(k256K, true);
  // A power of two tops its class: 200 KiB shares 256 KiB's; 257 KiB has its own round.
  EXPECT_EQ(t.plan(200 * 1024).path, Path::single_copy);
  const CopyTuner::Vote v = play_round(t, k256K + 1024, microseconds(50), microseconds(60));
  EXPECT_EQ(v.single_copy_ns, 60000u);
  EXPECT_EQ(t.plan(k256K).path, Path::single_copy);
}

TEST(CopyTuner, SmallCallsStayOnTheSlots) {
  CopyTuner t;
  for (int i = 0; i < 3 * kBlock; ++i) {
    const CopyTuner::Plan p = t.plan(CopyTuner::kMinBytes - 1);
    ASSERT_EQ(p.path, Path::slots);
    ASSERT_FALSE(p.timed);
    ASSERT_FALSE(p.trial);
  }
}

}  // namespace
}  // namespace spark::coll
