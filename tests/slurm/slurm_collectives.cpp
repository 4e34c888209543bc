// A libspark program for the SLURM tests (public API only): run under `srun --mpi=pmix`
// (SLURM's PMIx server) or sparkrun, it checks allreduce, allgather, broadcast and
// reduce_scatter results on every rank.
//   slurm_collectives                  collectives; prints "rank R of N: collectives ok"
//   slurm_collectives --stop-rank K    then rank K stops answering (sleeps) while the others
//                                      allreduce: their wait times out after
//                                      SPARKNET_ROCE_TIMEOUT_MS and libspark's fail-stop
//                                      aborts the job with the one-line record
//   slurm_collectives --kill-rank K    then rank K kills itself with SIGKILL while the others
//                                      allreduce (a rank that dies: the launcher ends the job)
// The "collectives ok" line names the rank's node: SPARK_HOST (sparkrun) and SLURMD_NODENAME
// (set by the slurmd whose step the rank runs in), so tests can check where it ran.
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

#include "spark/spark.hpp"

namespace {

int check(bool ok, int rank, const char* what) {
  if (!ok) std::fprintf(stderr, "slurm_collectives: rank %d: %s gave wrong data\n", rank, what);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int stop_rank = -1;
  bool kill_it = false;
  if (argc == 3 && std::string_view(argv[1]) == "--kill-rank") kill_it = true;
  if (argc == 3 && (std::string_view(argv[1]) == "--stop-rank" || kill_it)) {
    const std::string_view s(argv[2]);
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), stop_rank);
    if (ec != std::errc() || p != s.data() + s.size() || stop_rank < 0) stop_rank = -2;
  }
  if (argc != 1 && stop_rank < 0) {
    std::fprintf(stderr, "usage: slurm_collectives [--stop-rank K | --kill-rank K]\n");
    return 2;
  }
  try {
    spark::Communicator comm = spark::init();
    const int rank = comm.rank(), n = comm.size();
    int bad = 0;

    // allreduce: sum of rank+1 over 4099 int64 elements (not a multiple of n: uneven chunks).
    std::vector<std::int64_t> v(4099);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = (rank + 1) * static_cast<std::int64_t>(i + 1);
    comm.allreduce(v.data(), v.data(), v.size(), spark::DType::i64, spark::ReduceOp::sum);
    const std::int64_t tri = static_cast<std::int64_t>(n) * (n + 1) / 2;
    bool ok = true;
    for (std::size_t i = 0; i < v.size(); ++i)
      ok = ok && v[i] == tri * static_cast<std::int64_t>(i + 1);
    bad += check(ok, rank, "allreduce(i64, sum)");

    // allreduce max on float.
    std::vector<float> f(33, static_cast<float>(rank));
    comm.allreduce(f.data(), f.data(), f.size(), spark::DType::f32, spark::ReduceOp::max);
    ok = true;
    for (float x : f) ok = ok && x == static_cast<float>(n - 1);
    bad += check(ok, rank, "allreduce(f32, max)");

    // allgather: block r holds r*10 + j.
    std::vector<std::int32_t> mine(5), all(5 * static_cast<std::size_t>(n));
    for (int j = 0; j < 5; ++j) mine[static_cast<std::size_t>(j)] = rank * 10 + j;
    comm.allgather(mine.data(), all.data(), mine.size(), spark::DType::i32);
    ok = true;
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < 5; ++j) ok = ok && all[static_cast<std::size_t>(r * 5 + j)] == r * 10 + j;
    bad += check(ok, rank, "allgather(i32)");

    // broadcast from the last rank.
    std::vector<double> b(100, rank == n - 1 ? 2.5 : -1.0);
    comm.broadcast(b.data(), b.size(), spark::DType::f64, n - 1);
    ok = true;
    for (double x : b) ok = ok && x == 2.5;
    bad += check(ok, rank, "broadcast(f64)");

    // reduce_scatter: every rank sends 1s; block r of the sum is n everywhere.
    std::vector<std::int32_t> rs_in(7 * static_cast<std::size_t>(n), 1), rs_out(7);
    comm.reduce_scatter(rs_in.data(), rs_out.data(), rs_out.size(), spark::DType::i32,
                        spark::ReduceOp::sum);
    ok = true;
    for (std::int32_t x : rs_out) ok = ok && x == n;
    bad += check(ok, rank, "reduce_scatter(i32, sum)");

    const char* host = std::getenv("SPARK_HOST");
    const char* slurmd = std::getenv("SLURMD_NODENAME");
    std::printf("slurm_collectives: rank %d of %d: collectives %s on host %s (slurmd %s)\n", rank,
                n, bad ? "WRONG" : "ok", host ? host : "-", slurmd ? slurmd : "-");
    std::fflush(stdout);
    if (bad) return 1;

    if (stop_rank >= 0) {
      if (rank == stop_rank && kill_it) ::kill(::getpid(), SIGKILL);
      if (rank == stop_rank) {
        // Stops answering: never joins the next allreduce. Only the group abort ends it.
        for (;;) pause();
      }
      comm.allreduce(v.data(), v.data(), v.size(), spark::DType::i64, spark::ReduceOp::sum);
      std::fprintf(stderr, "slurm_collectives: rank %d: allreduce without rank %d returned\n", rank,
                   stop_rank);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "slurm_collectives: %s\n", e.what());
    return 1;
  }
}
