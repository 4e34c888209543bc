// Correctness of every collective x dtype x op x size, over tcp and shm, for 1..4 ranks, in
// forked processes wired up by the real environment rendezvous. Results must equal the
// rank-ordered fold bit for bit, and be bit-identical on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coll/copy_tuner.hpp"
#include "coll/reduce.hpp"
#include "multiproc.hpp"
#include "test_data.hpp"
#include "transport/shm/ptracer.hpp"

namespace spark::test {
namespace {

constexpr std::size_t kSizes[] = {0, 1, 7, 4096 + 3};
constexpr std::size_t kBig = 8u << 20;  // bytes, for a subset

// What the checks cover: every dtype, op and size, or a leaner grid where many oversubscribed
// ranks make each call slow.
struct Grid {
  std::vector<DType> dtypes{std::begin(kAllDTypes), std::end(kAllDTypes)};
  std::vector<ReduceOp> ops{std::begin(kAllOps), std::end(kAllOps)};
  std::vector<std::size_t> sizes{std::begin(kSizes), std::end(kSizes)};
};

int check_allreduce(CommunicatorImpl& comm, int& salt, const Grid& g = {}) {
  int errors = 0;
  const int n = comm.size();
  for (AllreduceAlgo algo : {AllreduceAlgo::automatic, AllreduceAlgo::one_shot,
                             AllreduceAlgo::two_phase, AllreduceAlgo::single_copy}) {
    comm.set_allreduce_algo(algo);
    for (DType dt : g.dtypes)
      for (ReduceOp op : g.ops)
        for (std::size_t count : g.sizes)
          for (bool in_place : {false, true}) {
            ++salt;
            auto in = gen(dt, comm.rank(), salt, count, op);
            auto expect = reference(dt, op, n, salt, count);
            std::vector<std::byte> out(in.size());
            if (in_place) {
              comm.allreduce(in.data(), in.data(), count, dt, op);
              out = in;
            } else {
              comm.allreduce(in.data(), out.data(), count, dt, op);
            }
            RANK_CHECK(out == expect, "allreduce algo %d %s %s count %zu in_place %d",
                       static_cast<int>(algo), std::string(to_string(dt)).c_str(),
                       std::string(to_string(op)).c_str(), count, static_cast<int>(in_place));
            // Bit-identical on every rank.
            std::uint64_t h = fnv(out.data(), out.size());
            std::vector<std::uint64_t> all(static_cast<std::size_t>(n));
            comm.allgather(&h, all.data(), 1, DType::i64);
            for (auto x : all) RANK_CHECK(x == h, "allreduce results differ between ranks");
          }
  }
  comm.set_allreduce_algo(AllreduceAlgo::automatic);
  return errors;
}

int check_reduce_scatter(CommunicatorImpl& comm, int& salt, const Grid& g = {}) {
  int errors = 0;
  const int n = comm.size();
  for (DType dt : g.dtypes)
    for (ReduceOp op : g.ops)
      for (std::size_t count : g.sizes) {
        ++salt;
        const std::size_t total = count * static_cast<std::size_t>(n), es = dtype_size(dt);
        auto in = gen(dt, comm.rank(), salt, total, op);
        auto full = reference(dt, op, n, salt, total);
        std::vector<std::byte> out(count * es);
        comm.reduce_scatter(in.data(), out.data(), count, dt, op);
        RANK_CHECK(std::memcmp(out.data(),
                               full.data() + static_cast<std::size_t>(comm.rank()) * count * es,
                               count * es) == 0,
                   "reduce_scatter %s %s count %zu", std::string(to_string(dt)).c_str(),
                   std::string(to_string(op)).c_str(), count);
      }
  return errors;
}

int check_data_movement(CommunicatorImpl& comm, int& salt, const Grid& g = {}) {
  int errors = 0;
  const int n = comm.size(), me = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  for (DType dt : g.dtypes)
    for (std::size_t count : g.sizes) {
      const std::size_t es = dtype_size(dt);
      // allgather
      ++salt;
      {
        auto in = gen(dt, me, salt, count);
        std::vector<std::byte> out(un * count * es);
        comm.allgather(in.data(), out.data(), count, dt);
        for (int r = 0; r < n; ++r) {
          auto e = gen(dt, r, salt, count);
          RANK_CHECK(std::memcmp(out.data() + static_cast<std::size_t>(r) * count * es, e.data(),
                                 e.size()) == 0,
                     "allgather %s count %zu block %d", std::string(to_string(dt)).c_str(), count,
                     r);
        }
      }
      // broadcast from a rotating root
      ++salt;
      {
        const int root = salt % n;
        auto buf = gen(dt, me, salt, count);
        comm.broadcast(buf.data(), count, dt, root);
        RANK_CHECK(buf == gen(dt, root, salt, count), "broadcast %s count %zu root %d",
                   std::string(to_string(dt)).c_str(), count, root);
      }
      // alltoall: block j of rank r's input = gen(r, salt*64 + j)
      ++salt;
      {
        std::vector<std::byte> in(un * count * es), out(un * count * es);
        for (int j = 0; j < n; ++j) {
          auto b = gen(dt, me, salt * 64 + j, count);
          if (!b.empty())
            std::memcpy(in.data() + static_cast<std::size_t>(j) * count * es, b.data(), b.size());
        }
        comm.alltoall(in.data(), out.data(), count, dt);
        for (int r = 0; r < n; ++r) {
          auto e = gen(dt, r, salt * 64 + me, count);
          RANK_CHECK(std::memcmp(out.data() + static_cast<std::size_t>(r) * count * es, e.data(),
                                 e.size()) == 0,
                     "alltoall %s count %zu from %d", std::string(to_string(dt)).c_str(), count, r);
        }
      }
      // alltoallv: rank r sends (count + r + 2j) % (count + 3) elements to j
      ++salt;
      {
        auto cnt = [&](int from, int to) {
          return (count + static_cast<std::size_t>(from) + 2 * static_cast<std::size_t>(to)) %
                 (count + 3);
        };
        std::vector<std::size_t> sc(un), sd(un), rc(un), rd(un);
        std::size_t st = 0, rt = 0;
        for (int j = 0; j < n; ++j) {
          const auto uj = static_cast<std::size_t>(j);
          sc[uj] = cnt(me, j);
          sd[uj] = st;
          st += sc[uj] + 1;  // gaps between blocks
          rc[uj] = cnt(j, me);
          rd[uj] = rt;
          rt += rc[uj] + 2;
        }
        std::vector<std::byte> in(st * es), out(rt * es);
        for (int j = 0; j < n; ++j) {
          auto b = gen(dt, me, salt * 64 + j, sc[static_cast<std::size_t>(j)]);
          if (!b.empty())
            std::memcpy(in.data() + sd[static_cast<std::size_t>(j)] * es, b.data(), b.size());
        }
        comm.alltoallv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), dt);
        for (int r = 0; r < n; ++r) {
          auto e = gen(dt, r, salt * 64 + me, rc[static_cast<std::size_t>(r)]);
          RANK_CHECK(std::memcmp(out.data() + rd[static_cast<std::size_t>(r)] * es, e.data(),
                                 e.size()) == 0,
                     "alltoallv %s count %zu from %d", std::string(to_string(dt)).c_str(), count,
                     r);
        }
      }
      // send/recv around a ring (even ranks send first)
      if (n > 1) {
        ++salt;
        const int right = (me + 1) % n, left = (me + n - 1) % n;
        auto mine = gen(dt, me, salt, count);
        std::vector<std::byte> got(count * es);
        if (me % 2 == 0) {
          comm.send(mine.data(), count, dt, right);
          comm.recv(got.data(), count, dt, left);
        } else {
          comm.recv(got.data(), count, dt, left);
          comm.send(mine.data(), count, dt, right);
        }
        RANK_CHECK(got == gen(dt, left, salt, count), "send/recv %s count %zu",
                   std::string(to_string(dt)).c_str(), count);
      }
      comm.barrier();
    }
  return errors;
}

int check_big(CommunicatorImpl& comm) {
  int errors = 0;
  const int n = comm.size();
  const std::size_t count = kBig / 4;
  for (DType dt : {DType::f32, DType::bf16}) {
    const std::size_t c = dt == DType::f32 ? count : count / 2;
    auto in = gen(dt, comm.rank(), 1000, c);
    std::vector<std::byte> out(in.size());
    comm.allreduce(in.data(), out.data(), c, dt, ReduceOp::sum);
    RANK_CHECK(out == reference(dt, ReduceOp::sum, n, 1000, c), "allreduce 8 MiB %s",
               std::string(to_string(dt)).c_str());
  }
  {
    const std::size_t per = count / static_cast<std::size_t>(n);
    auto in = gen(DType::f32, comm.rank(), 1001, per * static_cast<std::size_t>(n));
    std::vector<std::byte> out(per * 4);
    comm.reduce_scatter(in.data(), out.data(), per, DType::f32, ReduceOp::sum);
    auto full = reference(DType::f32, ReduceOp::sum, n, 1001, per * static_cast<std::size_t>(n));
    RANK_CHECK(
        std::memcmp(out.data(), full.data() + static_cast<std::size_t>(comm.rank()) * per * 4,
                    per * 4) == 0,
        "reduce_scatter 8 MiB");
    std::vector<std::byte> all(per * 4 * static_cast<std::size_t>(n));
    comm.allgather(out.data(), all.data(), per, DType::f32);
    RANK_CHECK(all == full, "allgather 8 MiB");
  }
  return errors;
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(Collectives, EveryCollectiveDtypeOpAndSize) {
  RankSpec spec;
  spec.size = std::get<0>(GetParam());
  spec.transport = std::get<1>(GetParam());
  auto codes = run_ranks(
      spec,
      [](CommunicatorImpl& comm, int) {
        int salt = 0;
        int errors = check_allreduce(comm, salt);
        errors += check_reduce_scatter(comm, salt);
        errors += check_data_movement(comm, salt);
        if (comm.size() == 2 || comm.size() == 3) errors += check_big(comm);
        return errors == 0 ? 0 : 1;
      },
      std::chrono::seconds(240));
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::ValuesIn(test_transports())),
                         [](const auto& info) {
                           return std::get<1>(info.param) + "_" +
                                  std::to_string(std::get<0>(info.param)) + "ranks";
                         });

// 64 ranks on this machine's few CPUs over shm (oversubscribed, as a 20-core Spark with one
// rank per core is not, but the wire-up's cost per rank and the wait under oversubscription
// are what this exercises): every collective on every path, a lean grid of dtypes, ops and
// sizes, then a large allreduce and reduce_scatter, within a bound on the whole job. Every
// pair of ranks connects (the collectives are all-to-all) and every pair carries data.
TEST(ManyRanks, SixtyFourRanksPassTheCollectivesSuite) {
  RankSpec spec;
  spec.size = 64;
  spec.transport = "shm";
  spec.timeout_ms = 60000;
  const auto t0 = std::chrono::steady_clock::now();
  auto codes = run_ranks(
      spec,
      [](CommunicatorImpl& comm, int) {
        int salt = 0, errors = 0;
        Grid g;
        g.dtypes = {DType::f32};  // mixed magnitudes and signs: a fold out of order differs
        g.ops = {ReduceOp::sum};
        g.sizes = {7, 4096 + 3};
        errors += check_allreduce(comm, salt, g);
        errors += check_reduce_scatter(comm, salt, g);
        errors += check_data_movement(comm, salt, g);
        // Large: every rank's chunk crosses every pair (two-phase or single copy).
        const std::size_t per = 4096, count = per * 64;
        auto in = gen(DType::f32, comm.rank(), 2000, count);
        std::vector<std::byte> out(in.size());
        comm.allreduce(in.data(), out.data(), count, DType::f32, ReduceOp::sum);
        RANK_CHECK(out == reference(DType::f32, ReduceOp::sum, 64, 2000, count),
                   "allreduce of %zu floats", count);
        std::vector<std::byte> mine(per * 4);
        comm.reduce_scatter(in.data(), mine.data(), per, DType::f32, ReduceOp::sum);
        RANK_CHECK(
            std::memcmp(mine.data(), out.data() + static_cast<std::size_t>(comm.rank()) * per * 4,
                        per * 4) == 0,
            "reduce_scatter of %zu floats per rank", per);
        return errors == 0 ? 0 : 1;
      },
      std::chrono::seconds(240));
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  std::printf("64 ranks: %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// What the shm wire-up costs a rank grows linearly in the node's ranks: its own segment (a
// mailbox per local rank) plus one mailbox mapped per peer (not every peer's whole segment),
// and nothing populated ahead of use (after init's barrier only the pages its messages
// touched). Read from /proc/self/smaps: every mapping of a /dev/shm/spark-* segment but the
// flight recorder's.
TEST(ManyRanks, ShmMapsOneMailboxPerPeerAndPopulatesNothing) {
  RankSpec spec;
  spec.size = 8;
  spec.transport = "shm";
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int) {
    int errors = 0;
    std::FILE* f = std::fopen("/proc/self/smaps", "r");
    if (f == nullptr) return kRankSkip;
    const std::size_t n = 8, mailbox = CommOptions{}.slots * (CommOptions{}.shm_slot_bytes + 64);
    std::size_t size_kb = 0, rss_kb = 0, maps = 0;
    bool counting = false;
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      const std::string l(line);
      if (l.find('-') < l.find(' ') && l.find(" r") != std::string::npos) {  // a mapping's line
        counting = l.find("/dev/shm/spark-") != std::string::npos &&
                   l.find("-flight-") == std::string::npos;
        maps += counting ? 1 : 0;
      } else if (counting && l.rfind("Size:", 0) == 0) {
        size_kb += std::stoul(l.substr(5));
      } else if (counting && l.rfind("Rss:", 0) == 0) {
        rss_kb += std::stoul(l.substr(4));
      }
    }
    std::fclose(f);
    RANK_CHECK(maps == n, "%zu shm mappings, expected %zu (its own segment and one per peer)", maps,
               n);
    // 2n - 1 mailboxes (n in its own segment, one in each peer's); whole segments were n * n.
    RANK_CHECK(size_kb * 1024 < (2 * n) * (mailbox + 8192),
               "%zu KiB of shm mapped for %zu ranks (mailboxes of %zu bytes)", size_kb, n, mailbox);
    RANK_CHECK(rss_kb * 1024 < 4 * n * 65536, "%zu KiB of shm resident after init", rss_kb);
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << "no /proc/self/smaps here";
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The fold order is fixed (rank 0, 1, 2, 3): values chosen so that any other order differs.
TEST(Determinism, FixedRankOrderForF32AndBf16) {
  for (const std::string& transport : test_transports()) {
    RankSpec spec;
    spec.size = 4;
    spec.transport = transport;
    auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
      int errors = 0;
      const float f[4] = {1e8f, 1.0f, -1e8f, 1.0f};  // ((1e8+1)-1e8)+1 = 1, (1+1)+(1e8-1e8) = 2
      const float big = 33554432.0f;                 // 2^25: exact in bf16, 2^25+1 is not in float
      const float b[4] = {big, 1.0f, -big, 1.0f};
      for (AllreduceAlgo algo :
           {AllreduceAlgo::one_shot, AllreduceAlgo::two_phase, AllreduceAlgo::single_copy}) {
        comm.set_allreduce_algo(algo);
        std::vector<float> x(1000, f[rank]);
        comm.allreduce(x.data(), x.data(), x.size(), DType::f32, ReduceOp::sum);
        for (float v : x)
          RANK_CHECK(v == 1.0f, "f32 sum gave %g, expected 1 (rank order)", static_cast<double>(v));
        std::vector<std::uint16_t> y(1000, coll::float_to_bf16(b[rank]));
        comm.allreduce(y.data(), y.data(), y.size(), DType::bf16, ReduceOp::sum);
        for (auto v : y)
          RANK_CHECK(coll::bf16_to_float(v) == 1.0f, "bf16 sum gave %g, expected 1",
                     static_cast<double>(coll::bf16_to_float(v)));
      }
      return errors == 0 ? 0 : 1;
    });
    for (std::size_t r = 0; r < codes.size(); ++r)
      EXPECT_EQ(codes[r], 0) << transport << " rank " << r;
  }
}

// The one-shot / two-phase crossover: measured per rank count and reach (docs/collectives.md),
// the same on every rank; exactly the calls at or below it go one-shot (one_shot_calls), and
// across it the results stay the rank-ordered fold on every rank.
TEST(Crossover, ByRanksAndReach) {
  EXPECT_EQ(CommunicatorImpl::one_shot_crossover(false, 2), 64u * 1024);
  EXPECT_EQ(CommunicatorImpl::one_shot_crossover(false, 3), 16u * 1024);
  EXPECT_EQ(CommunicatorImpl::one_shot_crossover(false, 4), 16u * 1024);
  EXPECT_EQ(CommunicatorImpl::one_shot_crossover(true, 2), 256u * 1024);
  EXPECT_EQ(CommunicatorImpl::one_shot_crossover(true, 3), 32u * 1024);
  struct Case {
    const char* transport;
    int size;
  };
  for (const Case c : {Case{"shm", 2}, Case{"shm", 3}, Case{"tcp", 2}}) {
    const char* transport = c.transport;
    const int size = c.size;
    RankSpec spec;
    spec.size = size;
    spec.transport = transport;
    const bool network = std::string(transport) == "tcp";
    auto codes = run_ranks(spec, [size, network, transport](CommunicatorImpl& comm, int) {
      int errors = 0;
      const std::size_t max = comm.one_shot_max_bytes();
      RANK_CHECK(max == CommunicatorImpl::one_shot_crossover(network, size),
                 "%d ranks over %s: one-shot up to %zu B", size, transport, max);
      int salt = 1000;
      for (std::size_t bytes : {max - 4, max, max + 4}) {
        const std::size_t count = bytes / sizeof(float);
        ++salt;
        auto in = gen(DType::f32, comm.rank(), salt, count, ReduceOp::sum);
        auto expect = reference(DType::f32, ReduceOp::sum, size, salt, count);
        std::vector<std::byte> out(in.size());
        const std::uint64_t before = comm.one_shot_calls();
        comm.allreduce(in.data(), out.data(), count, DType::f32, ReduceOp::sum);
        const std::uint64_t one_shot = comm.one_shot_calls() - before, want = bytes <= max;
        RANK_CHECK(one_shot == want, "%d ranks over %s: allreduce of %zu B (crossover %zu): %s",
                   size, transport, bytes, max, want ? "not one-shot" : "one-shot");
        RANK_CHECK(out == expect, "%d ranks over %s: allreduce of %zu B gave wrong numbers", size,
                   transport, bytes);
      }
      return errors == 0 ? 0 : 1;
    });
    for (std::size_t r = 0; r < codes.size(); ++r)
      EXPECT_EQ(codes[r], 0) << size << " ranks over " << transport << ", rank " << r;
  }
}

// A large allreduce and reduce_scatter (from 256 KiB of input the automatic choice is the
// single copy, docs/collectives.md), checked against the rank-ordered fold.
int check_large_reductions(CommunicatorImpl& c, int& salt, const char* which) {
  int errors = 0;
  CommunicatorImpl& comm = c;  // RANK_CHECK names comm
  const std::size_t count = 256 * 1024 + 3, es = sizeof(float);
  ++salt;
  auto in = gen(DType::f32, c.rank(), salt, count, ReduceOp::sum);
  auto expect = reference(DType::f32, ReduceOp::sum, c.size(), salt, count);
  std::vector<std::byte> out(in.size());
  c.allreduce(in.data(), out.data(), count, DType::f32, ReduceOp::sum);
  RANK_CHECK(out == expect, "%s: allreduce of %zu floats gave wrong numbers", which, count);
  const std::size_t rs = 128 * 1024;
  const std::size_t total = rs * static_cast<std::size_t>(c.size());
  ++salt;
  in = gen(DType::f32, c.rank(), salt, total, ReduceOp::sum);
  expect = reference(DType::f32, ReduceOp::sum, c.size(), salt, total);
  out.assign(rs * es, std::byte{0});
  c.reduce_scatter(in.data(), out.data(), rs, DType::f32, ReduceOp::sum);
  RANK_CHECK(std::memcmp(out.data(), expect.data() + static_cast<std::size_t>(c.rank()) * rs * es,
                         rs * es) == 0,
             "%s: reduce_scatter gave wrong numbers", which);
  return errors;
}

// An in-place sum of `count` f32 (default 8 MiB, past single_copy_min_) whose element i is
// (i % 97) + rank on every rank; returns how many elements came out wrong.
std::size_t wrong_in_large_rank_sum(CommunicatorImpl& comm, std::size_t count = 2u << 20) {
  const int n = comm.size();
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>((i % 97) + comm.rank());
  comm.allreduce(v.data(), v.data(), count, DType::f32, ReduceOp::sum);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    wrong += v[i] != static_cast<float>(n * static_cast<int>(i % 97) + n * (n - 1) / 2);
  return wrong;
}

// The single-copy path falls back as one: rank 1 has SPARK_SHM_CMA=off (it reads and writes no
// peer's memory), so every rank of the world takes the two-phase path for a large allreduce and
// reduce_scatter, with the right results; a sub-communicator of ranks 0 and 2, which reach each
// other, takes the single-copy path (its flag comes from its members' transports alone).
// The automatic choice then finds it in its first single-copy turn, on every rank in the same
// call, and stays on the slots with the right numbers.
TEST(SingleCopy, OneRankWithoutCrossMemoryMakesAllFallBack) {
  RankSpec spec;
  spec.size = 3;
  spec.transport = "shm";
  spec.per_rank_env = [](int rank, std::map<std::string, std::string>& env) {
    if (rank == 1) env["SPARK_SHM_CMA"] = "off";
  };
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0, salt = 0;
    // Rank 1 does not probe its peers; the others must reach every peer, rank 1 included.
    if (!every_rank(comm, rank == 1 || comm.reaches_every_peer_memory())) return kRankSkip;
    // The single copy even on uncontended CPUs (where the automatic choice is two-phase).
    comm.set_allreduce_algo(AllreduceAlgo::single_copy);
    errors += check_large_reductions(comm, salt, "world");
    RANK_CHECK(comm.single_copy_calls() == 0,
               "world: %llu calls took the single-copy path though rank 1 cannot",
               static_cast<unsigned long long>(comm.single_copy_calls()));
    auto pair = comm.split(rank == 1 ? -1 : 0, rank);
    if (pair) {
      errors += check_large_reductions(*pair, salt, "ranks 0 and 2");
      RANK_CHECK(pair->single_copy_calls() == 2, "ranks 0 and 2: %llu single-copy calls, not 2",
                 static_cast<unsigned long long>(pair->single_copy_calls()));
    }
    comm.set_allreduce_algo(AllreduceAlgo::automatic);
    std::size_t wrong = 0;
    for (int i = 0; i < 4 * (coll::CopyTuner::kTrials + 1); ++i)
      wrong += wrong_in_large_rank_sum(comm, 256 * 1024);  // 1 MiB: a tuned size
    RANK_CHECK(wrong == 0, "automatic: %zu wrong elements", wrong);
    RANK_CHECK(comm.single_copy_calls() == 0, "automatic: %llu single copies though rank 1 cannot",
               static_cast<unsigned long long>(comm.single_copy_calls()));
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << kNoCrossMemory;
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Where the tuner chose the two-phase path, large calls (from 4 MiB) still ask in the address
// exchange whether a rank wants the single copy for its contended CPUs: one rank that asks
// (here told to; on a machine it finds contended, the same) takes every rank along.
TEST(SingleCopy, OneRankThatWantsItTakesEveryRankAlong) {
  RankSpec spec;
  spec.size = 2;  // a CPU each on 2 CPUs: no rank asks on its own for contended CPUs
  spec.transport = "shm";
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    if (!every_rank(comm, comm.reaches_every_peer_memory())) return kRankSkip;
    // Every rank's tuner through a round that found the two-phase path faster.
    const std::size_t bytes = std::size_t{8} << 20;  // wrong_in_large_rank_sum's
    coll::CopyTuner& tuner = comm.copy_tuner(true);
    while (tuner.plan(bytes).path != coll::CopyTuner::Path::decide) {
    }
    tuner.decided(bytes, false);
    if (rank == 1) comm.ask_single_copy(true);
    const std::size_t wrong = wrong_in_large_rank_sum(comm);
    RANK_CHECK(wrong == 0, "%zu wrong elements", wrong);
    RANK_CHECK(comm.single_copy_calls() == 1, "rank %d: %llu single-copy calls, not 1", rank,
               static_cast<unsigned long long>(comm.single_copy_calls()));
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << kNoCrossMemory;
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The automatic choice times both paths and the ranks agree (coll/copy_tuner.hpp): of a size's
// first calls, a block goes the two-phase way and a block the single copy, all numbers right;
// the call after them is the faster path, the same on every rank, and so are the calls after
// it until the next round. Asked for on every rank, the same call takes the single copy.
TEST(SingleCopy, AutomaticTimesBothPathsAndEveryRankTakesTheSame) {
  RankSpec spec;
  spec.size = 2;  // a CPU each: no rank asks for the single copy for its contended CPUs
  spec.transport = "shm";
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    if (!every_rank(comm, comm.reaches_every_peer_memory())) return kRankSkip;
    constexpr std::uint64_t kBlock = coll::CopyTuner::kTrials + 1;
    // 1 MiB: below single_copy_min_, so no rank asks for the copy for contended CPUs (under
    // taskset or on a busy machine that made calls after the round copies on one rank's say).
    constexpr std::size_t kCount = 256 * 1024;
    std::size_t wrong = 0;
    for (std::uint64_t i = 0; i < 2 * kBlock; ++i) {
      wrong += wrong_in_large_rank_sum(comm, kCount);
      const std::uint64_t want = i < kBlock ? 0 : i + 1 - kBlock;
      RANK_CHECK(comm.single_copy_calls() == want,
                 "rank %d, call %llu: %llu single copies, not %llu", rank,
                 static_cast<unsigned long long>(i),
                 static_cast<unsigned long long>(comm.single_copy_calls()),
                 static_cast<unsigned long long>(want));
    }
    for (std::uint64_t i = 0; i < 5; ++i) wrong += wrong_in_large_rank_sum(comm, kCount);
    RANK_CHECK(wrong == 0, "%zu wrong elements", wrong);
    const std::uint64_t after = comm.single_copy_calls() - kBlock;
    RANK_CHECK(after == 0 || after == 5,
               "rank %d: %llu of the 5 calls after the round were single "
               "copies (all or none)",
               rank, static_cast<unsigned long long>(after));
    RANK_CHECK(every_rank(comm, after == 0) || every_rank(comm, after == 5),
               "the ranks took different paths after the round");
    comm.set_allreduce_algo(AllreduceAlgo::single_copy);
    const std::uint64_t before = comm.single_copy_calls();
    RANK_CHECK(wrong_in_large_rank_sum(comm, kCount) == 0, "forced single copy: wrong elements");
    RANK_CHECK(comm.single_copy_calls() == before + 1, "the forced call was no single copy");
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << kNoCrossMemory;
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// The deciding call counts every rank's vote: rank 0's own timings favour the slots (10 vs
// 20 us), rank 1's the single copy (40 vs 5 us); together the single copy (25 < 50 us), so
// both ranks take it. A rank that went by its own vote alone would take the slots while its
// peer copies (a mismatch failure).
TEST(SingleCopy, EveryRanksVoteDecides) {
  RankSpec spec;
  spec.size = 2;
  spec.transport = "shm";
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0;
    if (!every_rank(comm, comm.reaches_every_peer_memory())) return kRankSkip;
    constexpr std::size_t kCount = 256 * 1024, kBytes = kCount * sizeof(float);  // 1 MiB
    coll::CopyTuner& tuner = comm.copy_tuner(true);
    // The round with made-up times; until decided() every plan is the deciding call, so the
    // allreduce below is it.
    for (coll::CopyTuner::Plan p; (p = tuner.plan(kBytes)).path != coll::CopyTuner::Path::decide;) {
      const bool slots = p.path == coll::CopyTuner::Path::slots;
      if (p.timed)
        tuner.took(kBytes,
                   std::chrono::microseconds(rank == 0 ? (slots ? 10 : 20) : (slots ? 40 : 5)));
    }
    RANK_CHECK(wrong_in_large_rank_sum(comm, kCount) == 0, "wrong elements");
    RANK_CHECK(comm.single_copy_calls() == 1, "rank %d: %llu single copies, not 1", rank,
               static_cast<unsigned long long>(comm.single_copy_calls()));
    RANK_CHECK(tuner.plan(kBytes).path == coll::CopyTuner::Path::single_copy,
               "rank %d: the call after the decision is no single copy", rank);
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << kNoCrossMemory;
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Two "nodes" (SPARK_HOST): ranks 0 and 1 on a, rank 2 on b (tcp). The world has a peer over
// tcp, so no single copy there; the split of node a's ranks reaches its peer over shm alone and
// takes the single-copy path.
TEST(SingleCopy, SplitOfOneNodeOfAMixedWorld) {
  RankSpec spec;
  spec.size = 3;
  spec.transport = "auto";
  spec.per_rank_env = [](int rank, std::map<std::string, std::string>& env) {
    env["SPARK_HOST"] = rank < 2 ? "node-a" : "node-b";
  };
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int rank) {
    int errors = 0, salt = 0;
    auto node = comm.split(rank < 2 ? 0 : 1, rank);
    if (!every_rank(comm, rank == 2 || node->reaches_every_peer_memory())) return kRankSkip;
    comm.set_allreduce_algo(AllreduceAlgo::single_copy);
    node->set_allreduce_algo(AllreduceAlgo::single_copy);
    errors += check_large_reductions(comm, salt, "world");
    RANK_CHECK(comm.single_copy_calls() == 0, "world over shm+tcp: %llu single-copy calls",
               static_cast<unsigned long long>(comm.single_copy_calls()));
    errors += check_large_reductions(*node, salt, "one node");
    const std::uint64_t want = rank < 2 ? 2 : 0;  // rank 2 alone: size 1, nothing to copy
    RANK_CHECK(node->single_copy_calls() == want, "one node: %llu single-copy calls, not %llu",
               static_cast<unsigned long long>(node->single_copy_calls()),
               static_cast<unsigned long long>(want));
    return errors == 0 ? 0 : 1;
  });
  if (any_rank_skipped(codes)) GTEST_SKIP() << kNoCrossMemory;
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

// Yama at ptrace_scope 1 (Ubuntu's default): sibling ranks reach each other's memory because
// each declared the common parent (here the test process) as its ptracer
// (transport/shm/ptracer.hpp); without the declaration every probe fails with EPERM.
TEST(SingleCopy, SiblingsReachEachOtherUnderYama) {
  const auto scope = transport::read_yama_scope();
  if (!scope) GTEST_SKIP() << "no Yama on this kernel (/proc/sys/kernel/yama absent)";
  if (*scope != 1) GTEST_SKIP() << "Yama ptrace_scope is " << *scope << ", not 1";
  RankSpec spec;
  spec.size = 3;
  spec.transport = "shm";
  auto codes = run_ranks(spec, [](CommunicatorImpl& comm, int) {
    int errors = 0, salt = 0;
    RANK_CHECK(comm.reaches_every_peer_memory(),
               "ptrace_scope 1: a sibling's memory is not readable (PR_SET_PTRACER of the parent)");
    comm.set_allreduce_algo(AllreduceAlgo::single_copy);
    if (errors == 0) {
      errors += check_large_reductions(comm, salt, "world");
      RANK_CHECK(comm.single_copy_calls() == 2, "%llu single-copy calls, not 2",
                 static_cast<unsigned long long>(comm.single_copy_calls()));
    }
    return errors == 0 ? 0 : 1;
  });
  for (std::size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace spark::test
