// Collective benchmark in the style of nccl-tests:
//   sparkrun -n 2 build/examples/allreduce_perf -b 8 -e 256M -f 2
// Prints size, count, type, redop, root, time, algbw, busbw and #wrong per size; exits
// non-zero when any result is wrong. busbw uses nccl-tests' factors (allreduce 2(n-1)/n,
// reduce_scatter/allgather/alltoall (n-1)/n, broadcast 1), so figures compare directly.
// --work US[:JITTER]: before every collective each rank computes for US +- JITTER
// microseconds (default jitter US/4, different per rank and iteration), as in a decode step;
// time_us is then the whole step, coll_us the collective's own share (waiting for the slowest
// rank's work included), own_us the call's time after the last rank entered it (its cost
// without that wait; entry times are compared across ranks, so only when all share a node:
// else nan), all the slowest rank's mean.
// --split %N | /N: run on sub-communicators (Communicator::split, key = world rank): ranks with
// the same world rank % N (or / N) form one, as nccl-tests' NCCL_TESTS_SPLIT; the first rank
// of each prints its rows.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "spark/spark.hpp"

namespace {

using spark::DType;
using spark::ReduceOp;

std::size_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  const unsigned long long v = std::stoull(s, &pos);
  std::size_t mult = 1;
  const std::string suffix = s.substr(pos);
  if (suffix.empty())
    mult = 1;
  else if (suffix == "K" || suffix == "k")
    mult = 1024;
  else if (suffix == "M" || suffix == "m")
    mult = 1024 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024ull * 1024 * 1024;
  else
    throw CLI::ValidationError("size", "'" + s + "': expected a number with optional K, M or G");
  return static_cast<std::size_t>(v) * mult;
}

// Input value of rank r at element i: small integers, exact in every dtype.
double input(int r, std::size_t i) {
  return static_cast<double>((static_cast<std::size_t>(r) + i) % 4 + 1);
}

void fill(std::byte* p, DType dt, int rank, std::size_t first, std::size_t count) {
  const std::size_t es = spark::dtype_size(dt);
  for (std::size_t i = 0; i < count; ++i)
    spark::store_value(p + i * es, dt, input(rank, first + i));
}

// Elements [first, first+count) of the rank-ordered fold, computed block by block.
std::size_t count_wrong_reduced(const std::byte* got, DType dt, ReduceOp op, int n,
                                std::size_t first, std::size_t count) {
  const std::size_t es = spark::dtype_size(dt), blk = 4096;
  std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(n),
                                         std::vector<std::byte>(blk * es));
  std::vector<const void*> ptr;
  for (auto& v : in) ptr.push_back(v.data());
  std::vector<std::byte> want(blk * es);
  std::size_t wrong = 0;
  for (std::size_t b = 0; b < count; b += blk) {
    const std::size_t len = std::min(blk, count - b);
    for (int r = 0; r < n; ++r) fill(in[static_cast<std::size_t>(r)].data(), dt, r, first + b, len);
    spark::reduce_local(want.data(), ptr.data(), n, len, dt, op);
    for (std::size_t i = 0; i < len; ++i)
      if (std::memcmp(got + (b + i) * es, want.data() + i * es, es) != 0) ++wrong;
  }
  return wrong;
}

std::size_t count_wrong_copy(const std::byte* got, DType dt, int rank, std::size_t first,
                             std::size_t count) {
  const std::size_t es = spark::dtype_size(dt);
  std::vector<std::byte> want(es);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    spark::store_value(want.data(), dt, input(rank, first + i));
    if (std::memcmp(got + i * es, want.data(), es) != 0) ++wrong;
  }
  return wrong;
}

// xorshift64: a uniform draw in [0, 1), written identically in bench/mpi_allreduce.c.
double next_unit(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return static_cast<double>(x >> 11) / 9007199254740992.0;
}

// The work of one step: `us` microseconds of computation (a dependent chain of multiplies,
// so the CPU is busy as with real work, not asleep).
double compute_for(double us) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::nanoseconds(static_cast<long long>(us * 1000));
  double x = 1.0;
  do {
    for (int i = 0; i < 64; ++i) x = x * 1.0000001 + 1e-9;
  } while (std::chrono::steady_clock::now() < until);
  return x;
}

// "%N" or "/N" (N >= 1) -> N.
int parse_split(const std::string& s) {
  std::size_t pos = 0;
  int n = 0;
  try {
    if (s.size() >= 2 && (s[0] == '%' || s[0] == '/') &&
        std::isdigit(static_cast<unsigned char>(s[1])))
      n = std::stoi(s.substr(1), &pos);
  } catch (const std::exception&) {
    n = 0;
  }
  if (n < 1 || pos + 1 != s.size())
    throw spark::InvalidUsage("--split '" + s + "': expected %N or /N with N >= 1");
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allreduce_perf: libspark collective bandwidth and latency (nccl-tests style)"};
  std::string minb = "8", maxb = "64M", dtype_name = "float", op_name = "sum", coll = "allreduce",
              algo = "auto";
  double factor = 2;
  int iters = 20, warmup = 5, check = 1, root = 0;
  bool csv = false;
  app.add_option("-b,--minbytes", minb, "smallest size in bytes (K/M/G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", maxb, "largest size in bytes")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "multiply the size by this factor")
      ->capture_default_str()
      ->check(CLI::Range(1.01, 1024.0));
  app.add_option("-n,--iters", iters, "timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", warmup, "untimed warm-up iterations")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-d,--datatype", dtype_name, "f32|float, f64, f16, bf16, i32, i64, u8")
      ->capture_default_str();
  app.add_option("-o,--op", op_name, "sum, prod, min, max, avg")->capture_default_str();
  app.add_option("-c,--check", check, "check results (1) or not (0)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_option("-r,--root", root, "broadcast root")->capture_default_str();
  app.add_option("-t,--coll", coll, "allreduce, reduce_scatter, allgather, broadcast, alltoall")
      ->capture_default_str()
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "allgather", "broadcast", "alltoall"}));
  app.add_option(
         "-A,--algo", algo,
         "allreduce algorithm: auto, oneshot, twophase, singlecopy (shm with cross-memory attach)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "oneshot", "twophase", "singlecopy"}));
  std::string work;
  app.add_option("--work", work,
                 "US[:JITTER]: compute US +- JITTER microseconds (default jitter US/4) per rank "
                 "before every collective; adds coll_us, the collective's own time");
  std::string piece;
  app.add_option("-P,--piece", piece, "bytes per message (default: the slot size, 256K)");
  std::string split;
  app.add_option("--split", split,
                 "%N or /N: run on sub-communicators of the ranks with equal world rank % N "
                 "(or / N)");
  app.add_flag("--csv", csv, "print CSV instead of a table");
  CLI11_PARSE(app, argc, argv);

  try {
    const DType dt = spark::parse_dtype(dtype_name);
    const ReduceOp op = spark::parse_reduce_op(op_name);
    const std::size_t lo = parse_size(minb), hi = parse_size(maxb);
    double work_us = 0, jitter_us = 0;
    if (!work.empty()) {
      std::size_t pos = 0;
      work_us = std::stod(work, &pos);
      jitter_us = work_us / 4;
      if (pos < work.size() && work[pos] == ':')
        jitter_us = std::stod(work.substr(pos + 1));
      else if (pos != work.size())
        throw spark::InvalidUsage("--work '" + work + "': expected US or US:JITTER (microseconds)");
      if (work_us < 0 || jitter_us < 0 || jitter_us > work_us)
        throw spark::InvalidUsage("--work '" + work + "': need 0 <= JITTER <= US");
    }
    const int split_by = split.empty() ? 0 : parse_split(split);
    spark::Communicator world = spark::init();
    std::optional<spark::Communicator> sub;
    if (split_by > 0)
      sub = world.split(split[0] == '%' ? world.rank() % split_by : world.rank() / split_by,
                        world.rank());
    spark::Communicator& comm = sub ? *sub : world;
    comm.set_allreduce_algo(algo == "oneshot"      ? spark::AllreduceAlgo::one_shot
                            : algo == "twophase"   ? spark::AllreduceAlgo::two_phase
                            : algo == "singlecopy" ? spark::AllreduceAlgo::single_copy
                                                   : spark::AllreduceAlgo::automatic);
    if (!piece.empty()) comm.set_piece_bytes(parse_size(piece));
    const int n = comm.size(), me = comm.rank();
    if (root < 0 || root >= n)
      throw spark::InvalidUsage("-r/--root must be 0.." + std::to_string(n - 1));
    const std::size_t es = spark::dtype_size(dt), un = static_cast<std::size_t>(n);
    const bool per_rank = coll == "reduce_scatter" || coll == "allgather" || coll == "alltoall";
    // Buffers allocated and touched once: first-touch page faults must not be timed.
    std::vector<std::byte> sendbuf(std::max(hi, es * un) + es * un), recvbuf(sendbuf.size());
    const double bus = coll == "allreduce"   ? 2.0 * (n - 1) / n
                       : coll == "broadcast" ? 1.0
                                             : double(n - 1) / n;

    if (me == 0) {
      if (csv)
        std::printf(
            "coll,ranks,transport,size,count,type,redop,root,time_us,algbw_GBps,busbw_GBps,"
            "wrong,coll_us,own_us\n");
      else {
        std::printf(
            "# %s: %d ranks%s, transport %s, dtype %s, op %s, %d iterations, %d warm-up\n",
            coll.c_str(), n,
            sub ? (" of " + std::to_string(world.size()) + " in " + comm.name()).c_str() : "",
            comm.transports().c_str(), std::string(spark::to_string(dt)).c_str(),
            std::string(spark::to_string(op)).c_str(), iters, warmup);
        if (work_us > 0)
          std::printf("# work step: %.0f +- %.0f us of computation per rank before each call\n",
                      work_us, jitter_us);
        std::printf("%12s %12s %6s %6s %5s %10s %8s %8s %7s %10s %10s\n", "size(B)", "count",
                    "type", "redop", "root", "time(us)", "algbw", "busbw", "#wrong", "coll(us)",
                    "own(us)");
      }
    }
    std::size_t total_wrong = 0;
    for (double sz = static_cast<double>(std::max<std::size_t>(lo, es));
         sz <= static_cast<double>(hi) * 1.0000001; sz *= factor) {
      std::size_t count = static_cast<std::size_t>(sz) / es;
      if (per_rank) count = std::max<std::size_t>(count / un, 1);
      const std::size_t total_elems = per_rank ? count * un : count;
      const std::size_t bytes = total_elems * es;
      auto run = [&] {
        if (coll == "allreduce")
          comm.allreduce(sendbuf.data(), recvbuf.data(), count, dt, op);
        else if (coll == "reduce_scatter")
          comm.reduce_scatter(sendbuf.data(), recvbuf.data(), count, dt, op);
        else if (coll == "allgather")
          comm.allgather(sendbuf.data(), recvbuf.data(), count, dt);
        else if (coll == "broadcast")
          comm.broadcast(recvbuf.data(), count, dt, root);
        else
          comm.alltoall(sendbuf.data(), recvbuf.data(), count, dt);
      };
      // Inputs: element i of rank r's send buffer is input(r, i); broadcast sends recvbuf.
      fill(sendbuf.data(), dt, me, 0, coll == "allgather" ? count : total_elems);
      if (coll == "broadcast") fill(recvbuf.data(), dt, me, 0, count);
      std::size_t wrong = 0;
      if (check != 0) {
        run();
        if (coll == "allreduce")
          wrong = count_wrong_reduced(recvbuf.data(), dt, op, n, 0, count);
        else if (coll == "reduce_scatter")
          wrong = count_wrong_reduced(recvbuf.data(), dt, op, n,
                                      static_cast<std::size_t>(me) * count, count);
        else if (coll == "allgather") {
          for (int r = 0; r < n; ++r)
            wrong += count_wrong_copy(recvbuf.data() + static_cast<std::size_t>(r) * count * es, dt,
                                      r, 0, count);
        } else if (coll == "broadcast")
          wrong = count_wrong_copy(recvbuf.data(), dt, root, 0, count);
        else {
          for (int r = 0; r < n; ++r)
            wrong += count_wrong_copy(recvbuf.data() + static_cast<std::size_t>(r) * count * es, dt,
                                      r, static_cast<std::size_t>(me) * count, count);
        }
        if (coll == "broadcast") fill(recvbuf.data(), dt, me, 0, count);
      }
      for (int i = 0; i < warmup; ++i) run();
      // Work per step: different per rank, the same draws as bench/mpi_allreduce.c's.
      std::vector<double> steps(work_us > 0 ? static_cast<std::size_t>(iters) : 0);
      std::uint64_t rng = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(me + 1);
      for (double& w : steps) w = work_us + jitter_us * (2 * next_unit(rng) - 1);
      // Entry and exit times of every call (us on the node's steady clock) for own_us.
      std::vector<double> entered(steps.size()), left(steps.size());
      const auto on_clock = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
      };
      comm.barrier();
      double coll_us = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {
        if (work_us > 0) {
          compute_for(steps[static_cast<std::size_t>(i)]);
          const auto c0 = std::chrono::steady_clock::now();
          run();
          const auto c1 = std::chrono::steady_clock::now();
          coll_us += std::chrono::duration<double, std::micro>(c1 - c0).count();
          entered[static_cast<std::size_t>(i)] = on_clock(c0);
          left[static_cast<std::size_t>(i)] = on_clock(c1);
        } else {
          run();
        }
      }
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          iters;
      coll_us = work_us > 0 ? coll_us / iters : us;
      double own_us = us;
      if (work_us > 0) {  // from the last rank's entry to this rank's exit, per call
        comm.allreduce(entered.data(), entered.data(), entered.size(), DType::f64, ReduceOp::max);
        own_us = 0;
        for (std::size_t i = 0; i < entered.size(); ++i) own_us += left[i] - entered[i];
        own_us = comm.local_size() == n ? own_us / iters : std::nan("");
      }
      // Report the slowest rank's time and the sum of wrong elements over ranks.
      comm.allreduce(&us, &us, 1, DType::f64, ReduceOp::max);
      comm.allreduce(&coll_us, &coll_us, 1, DType::f64, ReduceOp::max);
      comm.allreduce(&own_us, &own_us, 1, DType::f64, ReduceOp::max);
      double w = static_cast<double>(wrong);
      comm.allreduce(&w, &w, 1, DType::f64, ReduceOp::sum);
      total_wrong += static_cast<std::size_t>(w);
      // GB/s of the collective itself (with --work: of its own share of the step).
      const double algbw = static_cast<double>(bytes) / coll_us / 1e3;
      if (me == 0) {
        const std::string root_s = coll == "broadcast" ? std::to_string(root) : "-1";
        const std::string op_s = (coll == "allreduce" || coll == "reduce_scatter")
                                     ? std::string(spark::to_string(op))
                                     : "none";
        if (csv)
          std::printf("%s,%d,%s,%zu,%zu,%s,%s,%s,%.2f,%.3f,%.3f,%.0f,%.2f,%.2f\n", coll.c_str(), n,
                      comm.transports().c_str(), bytes, per_rank ? count : total_elems,
                      std::string(spark::to_string(dt)).c_str(), op_s.c_str(), root_s.c_str(), us,
                      algbw, algbw * bus, w, coll_us, own_us);
        else
          std::printf("%12zu %12zu %6s %6s %5s %10.2f %8.3f %8.3f %7.0f %10.2f %10.2f\n", bytes,
                      per_rank ? count : total_elems, std::string(spark::to_string(dt)).c_str(),
                      op_s.c_str(), root_s.c_str(), us, algbw, algbw * bus, w, coll_us, own_us);
        std::fflush(stdout);
      }
    }
    if (me == 0 && !csv) std::printf("# wrong results: %zu\n", total_wrong);
    return total_wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_perf: %s\n", e.what());
    return 1;
  }
}
