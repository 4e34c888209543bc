#include "coll/copy_tuner.hpp"

#include <algorithm>
#include <bit>

namespace spark::coll {

namespace {

// A round: a block of calls of each path, the first of each untimed (its predecessor ran the
// other path: alternating call by call timed the single copy 15-20 % slow at 4-16 MiB, where
// back to back it was 20 % ahead), then the deciding call. The two-phase path first: a class's
// first calls are slow whichever path they take (16 MiB on this host: 2.9-3.3 ms for the single
// copy's fastest when it went first, 2.0 back to back), and the second round corrects a first
// that chose wrong.
constexpr std::uint32_t kBlock = CopyTuner::kTrials + 1;

bool single_copy_turn(std::uint32_t call) noexcept {
  return call >= kBlock;
}

// The fastest of a block: the first calls of a path after the other ran are slow for a few
// calls (the single copy's at 4-16 MiB: 2.2, 0.71, 0.55 ms at 4 MiB, 0.41 back to back), and
// preemptions only add time.
std::uint64_t fastest_ns(const std::array<CopyTuner::Ns, CopyTuner::kTrials>& v) noexcept {
  const CopyTuner::Ns fastest = *std::min_element(v.begin(), v.end());
  if (fastest == CopyTuner::Ns::max()) return 0;  // no call was timed: no vote
  return fastest.count() > 0 ? static_cast<std::uint64_t>(fastest.count()) : 1;
}

}  // namespace

// (2^(k-1), 2^k]: a power of two tops its class, so 64 KiB (the one-shot's largest on 2 ranks)
// is tuned with 33-63 KiB, which take the one-shot too, and not with 65-127 KiB (two-phase).
int CopyTuner::class_of(std::size_t bytes) noexcept {
  const int c = static_cast<int>(std::bit_width(bytes - 1)) - std::bit_width(kMinBytes - 1);
  return std::clamp(c, 0, kClasses - 1);
}

CopyTuner::Plan CopyTuner::plan(std::size_t bytes) noexcept {
  if (bytes < kMinBytes) return {};
  Class& c = classes_[class_of(bytes)];
  const std::uint32_t call = c.calls++;
  if (c.decided) {
    const Path path = c.single_copy ? Path::single_copy : Path::slots;
    if (call + 1 >= (c.rounds == 1 ? kFirstRetune : kRetuneEvery)) {  // the next call: a round
      const std::uint32_t rounds = c.rounds;
      c = Class{};
      c.rounds = rounds;
    }
    return {path, false};
  }
  if (call < 2 * kBlock)
    return {single_copy_turn(call) ? Path::single_copy : Path::slots, call % kBlock != 0, true};
  return {Path::decide, false, true};
}

void CopyTuner::took(std::size_t bytes, Ns took) noexcept {
  if (bytes < kMinBytes) return;
  Class& c = classes_[class_of(bytes)];
  const std::uint32_t call = c.calls - 1;  // the call plan() answered last
  if (c.decided || call >= 2 * kBlock || call % kBlock == 0) return;
  (single_copy_turn(call) ? c.single : c.slots)[call % kBlock - 1] = took;
}

CopyTuner::Vote CopyTuner::vote(std::size_t bytes) const noexcept {
  const Class& c = classes_[class_of(bytes)];
  return {fastest_ns(c.slots), fastest_ns(c.single)};
}

void CopyTuner::decided(std::size_t bytes, bool single_copy) noexcept {
  Class& c = classes_[class_of(bytes)];
  c.decided = true;
  c.single_copy = single_copy;
  c.calls = 0;
  if (c.rounds < 2) ++c.rounds;
}

bool CopyTuner::single_copy_wins(const std::vector<Vote>& votes) noexcept {
  if (votes.empty()) return false;
  std::uint64_t slots = 0, single = 0;
  for (const Vote& v : votes) {
    if (v.slots_ns == 0 || v.single_copy_ns == 0) return false;
    slots += v.slots_ns;
    single += v.single_copy_ns;
  }
  return single < slots;
}

}  // namespace spark::coll
