// The automatic choice between the path through the shm slots (the one-shot or the two-phase
// allreduce, whichever the size takes; the two-phase reduce_scatter) and the single copy
// (cross-memory attach) for the allreduce and reduce_scatter of ranks on one node, from
// kMinBytes up.
//
// Why measured, not fixed: which one wins depends on the machine. On the VM of 2 Dec 08:00 UTC
// the kernel's copy (it pins every 4 KiB page) lost from 256 KiB to 16 MiB (256 KiB 53-63 vs
// 23-33 us); on the host of 2 Dec 15:40 UTC it won from 64 KiB up (256 KiB 18-19 vs 31-38 us,
// 16 MiB 2.0 vs 2.6 ms). So per size class (a power of two, from kMinBytes) the first calls
// try both paths in turn, and the ranks then agree on the faster from every rank's timings.
//
// A round of a class: kTrials + 1 calls through the slots, as many of the single copy (the
// first of each block untimed: first touches, the other path's cache state), and the next call
// decides: each rank sends its fastest call of each path in the single copy's address exchange
// (coll/single_copy.cpp), and every rank applies single_copy_wins() to the same n votes, so
// all take the same path from then on. Rounds come again, the second after kFirstRetune calls
// of the class, the later ones every kRetuneEvery (load comes and goes). Every step counts
// calls, never time: all ranks make the same calls with the same sizes, so they plan alike
// without a message.
//
// Pure: no clock, no messages (tests/libspark/copy_tuner_test.cpp drives it).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spark::coll {

class CopyTuner {
 public:
  using Ns = std::chrono::nanoseconds;

  /// Smallest call (input bytes) the tuner chooses for; below it the slots.
  static constexpr std::size_t kMinBytes = 32 * 1024;
  /// Timed calls of each path per round.
  static constexpr int kTrials = 5;
  /// Calls of a class between the first round and the second: the first runs on buffers and
  /// caches the job has just begun to use (the single copy's 16 MiB calls were still 25 %
  /// slower than back to back after 5), the second on warm ones.
  static constexpr std::uint32_t kFirstRetune = 16;
  /// Calls of a class between the end of a later round and the start of the next.
  static constexpr std::uint32_t kRetuneEvery = 4096;

  enum class Path : std::uint8_t {
    slots,        ///< through the shm slots: one-shot or two-phase (no address exchange)
    single_copy,  ///< this call asks for the single copy
    decide,       ///< the address exchange carries this rank's vote(); the votes decide
  };
  struct Plan {
    Path path = Path::slots;
    bool timed = false;  ///< report the call's time through took()
    bool trial = false;  ///< part of a round (timed or not): the path is the round's, not asked
  };
  /// A rank's fastest timed call of each path in the round (0: none).
  struct Vote {
    std::uint64_t slots_ns = 0, single_copy_ns = 0;
  };

  /// What the next call of `bytes` does (advances the class's count).
  Plan plan(std::size_t bytes) noexcept;
  /// The call just planned with `timed` took `took`.
  void took(std::size_t bytes, Ns took) noexcept;
  /// This rank's vote for the deciding call of `bytes`'s class.
  Vote vote(std::size_t bytes) const noexcept;
  /// The deciding call's outcome (every rank's is the same: single_copy_wins of all votes).
  void decided(std::size_t bytes, bool single_copy) noexcept;
  /// The rule every rank applies to the n votes: the single copy when every rank voted and the
  /// ranks' fastest calls add up to less for it.
  static bool single_copy_wins(const std::vector<Vote>& votes) noexcept;

 private:
  static constexpr int kClasses = 32;
  struct Class {
    std::uint32_t calls = 0;   ///< calls of this round (or since the decision)
    std::uint32_t rounds = 0;  ///< rounds decided (counted to 2: the first and the others)
    bool decided = false;
    bool single_copy = false;
    std::array<Ns, kTrials> slots = untimed(), single = untimed();
  };
  static int class_of(std::size_t bytes) noexcept;
  static constexpr std::array<Ns, kTrials> untimed() noexcept {
    std::array<Ns, kTrials> a{};
    a.fill(Ns::max());  // a trial without took(): no time, never the fastest
    return a;
  }
  Class classes_[kClasses];
};

}  // namespace spark::coll
