// Sub-communicators (Communicator::split / dup, comm/split.cpp) over tcp and shm, 1..4 forked
// ranks: MPI_Comm_split's ranking (color, then key, then parent rank; negative color gets
// none), nested splits, dup, collectives on a sub-communicator interleaved with the parent's
// (correct data on both), a mismatch and a lost peer inside one (the record names it, and the
// failure is group-wide), and the cost of one split.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <tuple>

#include "multiproc.hpp"

namespace spark::test {
namespace {

/// The world ranks of `comm`'s members, in its rank order, as the members see them.
std::vector<std::int32_t> members_of(CommunicatorImpl& comm, int world_rank) {
  std::vector<std::int32_t> all(static_cast<std::size_t>(comm.size()));
  const std::int32_t mine = world_rank;
  comm.allgather(&mine, all.data(), 1, DType::i32);
  return all;
}

std::string join(const std::vector<std::int32_t>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

class Split : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(Split, ColorsKeysNegativeColorNestedAndDup) {
  RankSpec spec;
  spec.size = std::get<0>(GetParam());
  spec.transport = std::get<1>(GetParam());
  const std::string transport = spec.transport;
  auto codes = run_ranks(spec, [transport](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    const int n = comm.size();
    {  // color = parity, key = -rank: each group ranked by descending world rank
      auto sub = comm.split(rank % 2, -rank);
      RANK_CHECK(sub != nullptr, "no communicator for color %d", rank % 2);
      // What reaches its own members: a group of one rank needs no transport.
      const std::string want_transport = sub->size() == 1 ? "self" : transport;
      RANK_CHECK(sub->transport_summary() == want_transport, "transports '%s', expected '%s'",
                 sub->transport_summary().c_str(), want_transport.c_str());
      std::vector<std::int32_t> expect;
      for (int r = n - 1; r >= 0; --r)
        if (r % 2 == rank % 2) expect.push_back(r);
      RANK_CHECK(sub->size() == static_cast<int>(expect.size()), "size %d", sub->size());
      const auto pos = std::find(expect.begin(), expect.end(), rank) - expect.begin();
      RANK_CHECK(sub->rank() == pos, "rank %d, expected %d", sub->rank(), static_cast<int>(pos));
      const auto got = members_of(*sub, rank);
      RANK_CHECK(got == expect, "members %s, expected %s", join(got).c_str(), join(expect).c_str());
      RANK_CHECK(sub->name() == "comm 1 (color " + std::to_string(rank % 2) + ", size " +
                                    std::to_string(expect.size()) + ")",
                 "name '%s'", sub->name().c_str());
      {  // nested: split the parity group into its first rank and the rest
        auto nested = sub->split(sub->rank() == 0 ? 0 : 1, 0);
        std::vector<std::int32_t> want;
        for (std::size_t i = 0; i < expect.size(); ++i)
          if ((i == 0) == (sub->rank() == 0)) want.push_back(expect[i]);
        const auto m = members_of(*nested, rank);
        RANK_CHECK(m == want, "nested members %s, expected %s", join(m).c_str(),
                   join(want).c_str());
        std::int64_t x = rank;
        nested->allreduce(&x, &x, 1, DType::i64, ReduceOp::sum);
        RANK_CHECK(x == std::accumulate(want.begin(), want.end(), std::int64_t{0}),
                   "nested sum %lld", static_cast<long long>(x));
        RANK_CHECK(nested->name().rfind("comm 1.1 (color ", 0) == 0, "nested name '%s'",
                   nested->name().c_str());
      }
    }
    {  // equal keys: parent rank order; negative color: no communicator
      auto sub = comm.split(rank == 0 ? -1 : 7, 0);
      if (rank == 0) {
        RANK_CHECK(sub == nullptr, "a communicator for a negative color");
      } else {
        RANK_CHECK(sub != nullptr && sub->size() == n - 1 && sub->rank() == rank - 1,
                   "size %d rank %d", sub ? sub->size() : -1, sub ? sub->rank() : -1);
        if (sub) {
          std::int64_t x = rank;
          sub->allreduce(&x, &x, 1, DType::i64, ReduceOp::sum);
          RANK_CHECK(x == std::int64_t{n} * (n - 1) / 2, "sum %lld", static_cast<long long>(x));
        }
      }
    }
    {  // dup: same ranks, own sequence numbers, timeout inherited then settable
      comm.set_timeout_ms(7000);
      auto d = comm.dup();
      RANK_CHECK(d->rank() == rank && d->size() == n, "dup rank %d size %d", d->rank(), d->size());
      RANK_CHECK(d->timeout_ms() == 7000, "dup timeout %u", d->timeout_ms());
      d->set_timeout_ms(3000);
      RANK_CHECK(comm.timeout_ms() == 7000, "parent timeout %u after the dup's changed",
                 comm.timeout_ms());
      RANK_CHECK(members_of(*d, rank) == members_of(comm, rank), "dup members");
      RANK_CHECK(d->name() == "comm 3 (dup, size " + std::to_string(n) + ")", "dup name '%s'",
                 d->name().c_str());
    }
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Both communicators' messages share each pair's connection: interleaved calls, with pieces
// (> one 256 KiB slot) and send/recv, must give each its own correct data.
TEST_P(Split, CollectivesInterleavedWithTheParent) {
  RankSpec spec;
  spec.size = std::get<0>(GetParam());
  spec.transport = std::get<1>(GetParam());
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    const int n = comm.size();
    auto sub = comm.split(rank % 2, rank);
    std::vector<int> group;
    for (int r = rank % 2; r < n; r += 2) group.push_back(r);
    const int g = static_cast<int>(group.size());
    for (std::size_t count : {std::size_t{5}, std::size_t{100000}}) {
      for (int it = 0; it < 4; ++it) {
        std::vector<float> w(count, static_cast<float>(rank + it)),
            s(count, static_cast<float>(10 * rank + it));
        comm.allreduce(w.data(), w.data(), count, DType::f32, ReduceOp::sum);
        sub->allreduce(s.data(), s.data(), count, DType::f32, ReduceOp::sum);
        float ws = 0, ss = 0;
        for (int r = 0; r < n; ++r) ws += static_cast<float>(r + it);
        for (int r : group) ss += static_cast<float>(10 * r + it);
        RANK_CHECK(std::all_of(w.begin(), w.end(), [&](float v) { return v == ws; }), "world sum");
        RANK_CHECK(std::all_of(s.begin(), s.end(), [&](float v) { return v == ss; }), "sub sum");
        std::vector<std::int32_t> b(count, sub->rank() == 0 ? 1000 + rank : -1);
        sub->broadcast(b.data(), count, DType::i32, 0);
        RANK_CHECK(b[0] == 1000 + group[0] && b[count - 1] == 1000 + group[0], "sub broadcast");
        std::vector<std::int32_t> all(count * static_cast<std::size_t>(n));
        std::vector<std::int32_t> mine(count, rank);
        comm.allgather(mine.data(), all.data(), count, DType::i32);
        for (int r = 0; r < n; ++r)
          RANK_CHECK(all[static_cast<std::size_t>(r) * count] == r, "world allgather block %d", r);
        if (g > 1) {  // a ring inside the group
          const int right = (sub->rank() + 1) % g, left = (sub->rank() + g - 1) % g;
          std::vector<std::int32_t> got(count);
          if (sub->rank() % 2 == 0) {
            sub->send(mine.data(), count, DType::i32, right);
            sub->recv(got.data(), count, DType::i32, left);
          } else {
            sub->recv(got.data(), count, DType::i32, left);
            sub->send(mine.data(), count, DType::i32, right);
          }
          RANK_CHECK(got[0] == group[static_cast<std::size_t>(left)], "sub recv %d", got[0]);
        }
      }
    }
    sub->barrier();
    comm.barrier();
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Split,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::ValuesIn(test_transports())),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "ranks";
                         });

class SplitFault : public ::testing::TestWithParam<std::string> {};

// Different counts inside a sub-communicator: a mismatch naming it, and every communicator of
// the rank has failed with it (fail-stop is group-wide).
TEST_P(SplitFault, MismatchInsideNamesTheCommunicator) {
  RankSpec spec;
  spec.size = 3;
  spec.transport = GetParam();
  spec.timeout_ms = 3000;
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    auto sub = comm.split(rank == 0 ? 0 : 1, 0);  // rank 0 alone; ranks 1, 2 together
    if (rank == 0) return 0;
    std::vector<float> x(16, 1.0f);
    try {
      sub->allreduce(x.data(), x.data(), rank == 1 ? 10 : 11, DType::f32, ReduceOp::sum);
      RANK_CHECK(false, "mismatched counts were not detected");
    } catch (const CommFailure& e) {
      if (rank == 1) std::printf("record: %s\n", e.what());
      RANK_CHECK(e.record().cause == FailureCause::mismatch, "cause");
      const std::string detail = e.record().detail;
      RANK_CHECK(detail.find("rank " + std::to_string(3 - rank) + " called") != std::string::npos,
                 "world ranks in '%s'", detail.c_str());
      RANK_CHECK(detail.rfind("comm 1 (color 1, size 2): ", 0) == 0, "detail '%s'", detail.c_str());
      RANK_CHECK(e.record().rank == rank && e.record().peer == 3 - rank, "rank %d peer %d",
                 e.record().rank, e.record().peer);
    }
    RANK_CHECK(comm.failure().has_value(), "the world communicator did not fail with its sub");
    try {
      comm.barrier();
      RANK_CHECK(false, "the world still works after its sub failed");
    } catch (const CommFailure&) {
    }
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Two ranks that call their shared communicators in different orders get a mismatch (their
// messages share one connection), not each other's data.
TEST_P(SplitFault, CommunicatorsCalledInDifferentOrders) {
  RankSpec spec;
  spec.size = 2;
  spec.transport = GetParam();
  spec.timeout_ms = 3000;
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    auto d = comm.dup();
    std::vector<float> x(4, 1.0f);
    try {
      if (rank == 0)
        d->allreduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum);
      else
        comm.allreduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum);
      RANK_CHECK(false, "a message of another communicator was taken");
    } catch (const CommFailure& e) {
      RANK_CHECK(e.record().cause == FailureCause::mismatch, "cause");
      const std::string detail = e.record().detail;
      RANK_CHECK(detail.find("another communicator") != std::string::npos, "detail '%s'",
                 detail.c_str());
    }
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// A peer that is gone during a sub-communicator's collective: the record names the
// communicator and the peer's world rank.
TEST_P(SplitFault, LostPeerInsideNamesTheCommunicator) {
  RankSpec spec;
  spec.size = 3;
  spec.transport = GetParam();
  spec.timeout_ms = 5000;
  spec.quick_exit = true;
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    auto sub = comm.split(rank == 1 ? -1 : 0, 0);  // world ranks 0 and 2
    if (rank == 2) {
      std::fflush(nullptr);
      ::_exit(0);
    }
    if (rank == 1) return 0;
    std::vector<float> x(4, 1.0f);
    try {
      sub->allreduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum);
      RANK_CHECK(false, "the lost peer was not noticed");
    } catch (const CommFailure& e) {
      RANK_CHECK(e.record().cause == FailureCause::peer_closed ||
                     e.record().cause == FailureCause::timeout,
                 "cause %d", static_cast<int>(e.record().cause));
      const std::string detail = e.record().detail;
      // The name alone, or the name, ": " and a detail (never a dangling "comm 1 (...): ").
      const std::string name = "comm 1 (color 0, size 2)";
      RANK_CHECK(
          detail == name || (detail.rfind(name + ": ", 0) == 0 && detail.size() > name.size() + 2),
          "detail '%s'", detail.c_str());
      RANK_CHECK(e.record().peer == 2, "peer %d (world rank 2 expected)", e.record().peer);
    }
    RANK_CHECK(comm.failure().has_value(), "the world did not fail");
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, SplitFault, ::testing::ValuesIn(test_transports()));

// The cost of one split (an allgather of 8 bytes per rank, no wire-up): printed, and bounded
// far above what it measures so that only a split that reconnects would fail it.
TEST(SplitCost, OneSplitIsNoWireUp) {
  for (const std::string& transport : test_transports()) {
    RankSpec spec;
    spec.size = 4;
    spec.transport = transport;
    auto codes = run_ranks(spec, [transport](CommunicatorImpl& comm, int rank) {
      int errors = 0;
      constexpr int kSplits = 50;
      std::vector<double> us;
      comm.barrier();
      for (int i = 0; i < kSplits; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        auto sub = comm.split(rank % 2, rank);
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(us.begin(), us.end());
      if (rank == 0)
        std::printf(
            "split cost, 4 ranks %s: median %.1f us, min %.1f us, max %.1f us (%d splits)\n",
            transport.c_str(), us[us.size() / 2], us.front(), us.back(), kSplits);
      RANK_CHECK(us[us.size() / 2] < 200000.0, "median split %.0f us", us[us.size() / 2]);
      return errors == 0 ? 0 : 1;
    });
    for (std::size_t r = 0; r < codes.size(); ++r)
      EXPECT_EQ(codes[r], 0) << transport << " rank " << r;
  }
}

}  // namespace
}  // namespace spark::test
