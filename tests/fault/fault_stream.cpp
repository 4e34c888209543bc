// A rank program for the fail-stop tests and bench/failure.sh, run under sparkrun:
//   fault_stream kill SEED            rank SEED%size SIGKILLs itself at a seeded random moment
//                                     (0..30 ms) after the first allreduce, mid-stream
//   fault_stream stop VICTIM K [MS]   VICTIM SIGSTOPs itself after K allreduces; with MS the
//                                     others call set_timeout_ms(MS) after K/2 allreduces
//   fault_stream api c|cpp VICTIM     SPARK_ON_FAILURE=raise: VICTIM stops after 2 allreduces;
//                                     the others check the record through the C or C++ API and
//                                     print it as "RECORD ..." (the test compares c with cpp)
//   fault_stream healthy N            N allreduces, exits 0
//   fault_stream skew barrier|none MS the last rank sleeps MS after init (weight loading);
//                                     with "barrier" every rank calls barrier() first; then 5
//                                     allreduces
//   fault_stream mixed ROUNDS [COUNT] ROUNDS rounds of allreduce, reduce_scatter, allgather,
//                                     broadcast and alltoall of i32, each rank's block COUNT
//                                     (default 65536), COUNT/64 and COUNT/8 elements in turn;
//                                     prints "COMPLETED rank R mixed N in MS ms" (the wire
//                                     faults of tests/multihost/wire_faults.sh)
//   fault_stream late MS              200 allreduces, then the last rank sleeps MS and the
//                                     others wait for it in one allreduce: each prints
//                                     "LATE_WAIT rank R wall_ms W cpu_ms C" (its process's CPU
//                                     time during that wait: bench/failure.sh)
// Every rank checks every result: a wrong value prints "WRONG DATA" and exits 99. A stream
// that runs 30 s without a failure prints "COMPLETED" and exits 0 (a kill test then fails).
// SIGTERM is ignored so that sparkrun's group abort (SIGTERM, then SIGKILL after the kill
// grace) leaves each survivor time to make and report its own record.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "spark/spark.h"
#include "spark/spark.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kCount = 2048;

// Values differ per rank and iteration, so a stale or unfilled buffer cannot pass.
void fill(std::vector<float>& v, int rank, int it) {
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((rank + 1) * (it % 97 + 1) + i % 7);
}
bool verify(const std::vector<float>& v, int size, int it) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    const float want =
        static_cast<float>(size * (size + 1) / 2 * (it % 97 + 1) + size * static_cast<int>(i % 7));
    if (v[i] != want) return false;
  }
  return true;
}

[[noreturn]] void wrong(int rank, int it) {
  std::printf("WRONG DATA rank %d iteration %d\n", rank, it);
  std::fflush(stdout);
  std::_Exit(99);
}

std::string canonical(const spark::FailureRecord& r) {
  // Everything but the timing fields (waited_ms, time), which differ between runs.
  return "rank=" + std::to_string(r.rank) + " peer=" + std::to_string(r.peer) +
         " seq=" + std::to_string(r.seq) + " step=" + std::to_string(r.step) +
         " cause=" + std::to_string(static_cast<int>(r.cause)) +
         " timeout=" + std::to_string(r.timeout_ms) + " lane=" + r.lane + " op=" + r.op;
}

bool same(const spark::FailureRecord& a, const spark::FailureRecord& b) {
  return std::memcmp(&a, &b, sizeof a) == 0 ||
         (canonical(a) == canonical(b) && a.waited_ms == b.waited_ms &&
          a.time_unix_ns == b.time_unix_ns && spark::to_string(a) == spark::to_string(b));
}

int run_stream(const std::string& mode, int victim, int k, int seed, std::uint32_t new_timeout) {
  spark::Communicator comm = spark::init();
  comm.barrier();  // every rank is ready: the timeout measures communication only
  const int rank = comm.rank(), size = comm.size();
  if (mode == "kill") victim = seed % size;
  std::vector<float> v(kCount);
  const auto end = Clock::now() + std::chrono::seconds(30);
  for (int it = 0; mode == "healthy" ? it < k : Clock::now() < end; ++it) {
    if (new_timeout != 0 && it == k / 2 && rank != victim) comm.set_timeout_ms(new_timeout);
    fill(v, rank, it);
    comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
    if (!verify(v, size, it)) wrong(rank, it);
    if (rank != victim) continue;
    if (mode == "kill" && it == 0) {
      std::mt19937 rng(static_cast<unsigned>(seed));
      const int us = static_cast<int>(rng() % 30000);
      std::thread([us] {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    if (mode == "stop" && it + 1 == k) {
      std::printf("STOPPING rank %d after %d allreduces\n", rank, k);
      std::fflush(stdout);
      ::raise(SIGSTOP);
      // sparkrun's abort sends SIGCONT with its SIGTERM: stay silent (a stopped machine does
      // not come back), so that every survivor reaches its own deadline.
      for (;;) ::pause();
    }
  }
  std::printf("COMPLETED rank %d\n", rank);
  return 0;
}

int run_skew(bool use_barrier, int sleep_ms) {
  spark::Communicator comm = spark::init();
  const int rank = comm.rank(), size = comm.size();
  if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  if (use_barrier) comm.barrier();
  std::vector<float> v(kCount);
  for (int it = 0; it < 5; ++it) {
    fill(v, rank, it);
    comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
    if (!verify(v, size, it)) wrong(rank, it);
  }
  std::printf("COMPLETED rank %d\n", rank);
  return 0;
}

// Mixed collectives: every element of every result is checked against the value that each
// rank's input had there, so a lost, duplicated, reordered or corrupted byte cannot pass.
std::int32_t mixed_value(int rank, int it, std::size_t i) {
  return static_cast<std::int32_t>(
      (static_cast<std::size_t>(rank + 1) * 131 + static_cast<std::size_t>(it) * 17 + i) % 100003);
}

[[noreturn]] void wrong_in(const char* op, int rank, int it, std::size_t i) {
  std::printf("WRONG DATA rank %d iteration %d %s element %zu\n", rank, it, op, i);
  std::fflush(stdout);
  std::_Exit(99);
}

int run_mixed(int rounds, std::size_t count) {
  spark::Communicator comm = spark::init();
  comm.barrier();
  const int rank = comm.rank(), size = comm.size();
  const auto ranks = static_cast<std::size_t>(size);
  const std::size_t counts[] = {std::max<std::size_t>(count / 64, 1),
                                std::max<std::size_t>(count / 8, 1), count};
  std::vector<std::int32_t> a, b;
  const auto t0 = Clock::now();
  for (int it = 0; it < rounds; ++it) {
    const std::size_t n = counts[it % 3];
    auto sum_over_ranks = [&](std::size_t i) {
      std::int32_t want = 0;
      for (int r = 0; r < size; ++r) want += mixed_value(r, it, i);
      return want;
    };
    a.resize(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = mixed_value(rank, it, i);
    comm.allreduce(a.data(), a.data(), n, spark::DType::i32, spark::ReduceOp::sum);
    for (std::size_t i = 0; i < n; ++i)
      if (a[i] != sum_over_ranks(i)) wrong_in("allreduce", rank, it, i);

    a.resize(ranks * n);
    b.assign(n, -1);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = mixed_value(rank, it, i);
    comm.reduce_scatter(a.data(), b.data(), n, spark::DType::i32, spark::ReduceOp::sum);
    for (std::size_t i = 0; i < n; ++i)
      if (b[i] != sum_over_ranks(static_cast<std::size_t>(rank) * n + i))
        wrong_in("reduce_scatter", rank, it, i);

    a.resize(n);
    b.assign(ranks * n, -1);
    for (std::size_t i = 0; i < n; ++i) a[i] = mixed_value(rank, it, i);
    comm.allgather(a.data(), b.data(), n, spark::DType::i32);
    for (std::size_t i = 0; i < b.size(); ++i)
      if (b[i] != mixed_value(static_cast<int>(i / n), it, i % n))
        wrong_in("allgather", rank, it, i);

    const int root = it % size;
    for (std::size_t i = 0; i < n; ++i) a[i] = rank == root ? mixed_value(root, it, i) : -1;
    comm.broadcast(a.data(), n, spark::DType::i32, root);
    for (std::size_t i = 0; i < n; ++i)
      if (a[i] != mixed_value(root, it, i)) wrong_in("broadcast", rank, it, i);

    // Block d of rank s's input goes to rank d: there it is block s.
    a.resize(ranks * n);
    b.assign(ranks * n, -1);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = mixed_value(rank, it, i);
    comm.alltoall(a.data(), b.data(), n, spark::DType::i32);
    for (std::size_t i = 0; i < b.size(); ++i)
      if (b[i] !=
          mixed_value(static_cast<int>(i / n), it, static_cast<std::size_t>(rank) * n + i % n))
        wrong_in("alltoall", rank, it, i);
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::printf("COMPLETED rank %d mixed %d in %.0f ms\n", rank, rounds, ms);
  return 0;
}

double process_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

int run_late(int sleep_ms) {
  spark::Communicator comm = spark::init();
  const int rank = comm.rank(), size = comm.size();
  std::vector<float> v(kCount);
  int it = 0;
  for (; it < 200; ++it) {  // the wait policy has a fast history when the late wait comes
    fill(v, rank, it);
    comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
    if (!verify(v, size, it)) wrong(rank, it);
  }
  if (rank == size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  fill(v, rank, it);
  const double cpu0 = process_cpu_ms();
  const auto t0 = Clock::now();
  comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const double cpu = process_cpu_ms() - cpu0;
  if (!verify(v, size, it)) wrong(rank, it);
  if (rank != size - 1)
    std::printf("LATE_WAIT rank %d wall_ms %.1f cpu_ms %.2f\n", rank, wall, cpu);
  return 0;
}

int run_api_cpp(int victim) {
  spark::Communicator comm = spark::init();
  comm.barrier();
  const int rank = comm.rank();
  std::vector<float> v(kCount);
  for (int it = 0;; ++it) {
    fill(v, rank, it);
    try {
      comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
    } catch (const spark::CommFailure& e) {
      const spark::FailureRecord thrown = e.record();
      const auto got = comm.failure();
      if (!got || !same(*got, thrown))
        return std::printf("FAIL: failure() differs from the thrown record\n"), 1;
      if (std::string(e.what()) != spark::to_string(thrown))
        return std::printf("FAIL: what() is not the line\n"), 1;
      try {
        comm.check_health();
        return std::printf("FAIL: check_health() did not throw after the failure\n"), 1;
      } catch (const spark::CommFailure& h) {
        if (!same(h.record(), thrown))
          return std::printf("FAIL: check_health() record differs\n"), 1;
      }
      const auto t0 = Clock::now();
      try {
        comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
        return std::printf("FAIL: a call after the failure succeeded\n"), 1;
      } catch (const spark::CommFailure& later) {
        if (!same(later.record(), thrown))
          return std::printf("FAIL: a later call has another record\n"), 1;
      }
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      std::printf("RECORD %s later_call_ms=%lld line=%s\n", canonical(thrown).c_str(),
                  static_cast<long long>(ms), e.what());
      std::fflush(stdout);
      return 1;
    }
    if (!verify(v, comm.size(), it)) wrong(rank, it);
    if (rank == victim && it == 1) {
      ::raise(SIGSTOP);
      for (;;) ::pause();
    }
  }
}

int run_api_c(int victim) {
  spark_comm* comm = nullptr;
  if (spark_init(&comm) != SPARK_OK)
    return std::printf("FAIL: spark_init: %s\n", spark_last_error()), 1;
  if (spark_barrier(comm) != SPARK_OK)
    return std::printf("FAIL: barrier: %s\n", spark_last_error()), 1;
  const int rank = spark_rank(comm);
  std::vector<float> v(kCount);
  for (int it = 0;; ++it) {
    fill(v, rank, it);
    const int rc = spark_allreduce(comm, v.data(), v.data(), v.size(), SPARK_F32, SPARK_SUM);
    if (rc != SPARK_OK) {
      if (rc != SPARK_ERR_COMM_FAILED)
        return std::printf("FAIL: result %d: %s\n", rc, spark_last_error()), 1;
      const std::string line = spark_last_error();
      spark_failure_record c{};
      if (spark_failure(comm, &c) != 1)
        return std::printf("FAIL: spark_failure() has no record\n"), 1;
      spark::FailureRecord r;
      static_assert(sizeof r == sizeof c);
      std::memcpy(static_cast<void*>(&r), &c,
                  sizeof r);  // the layouts are asserted equal in c_api.cpp
      char buf[512];
      spark_format_failure(&c, buf, sizeof buf);
      if (line != buf || line != spark::to_string(r))
        return std::printf("FAIL: C line differs\n"), 1;
      if (spark_check_health(comm) != SPARK_ERR_COMM_FAILED || line != spark_last_error())
        return std::printf("FAIL: spark_check_health() after the failure\n"), 1;
      const auto t0 = Clock::now();
      if (spark_allreduce(comm, v.data(), v.data(), v.size(), SPARK_F32, SPARK_SUM) !=
              SPARK_ERR_COMM_FAILED ||
          line != spark_last_error())
        return std::printf("FAIL: a later call did not fail with the same record\n"), 1;
      spark_failure_record again{};
      spark_failure(comm, &again);
      if (std::memcmp(&again, &c, sizeof c) != 0)
        return std::printf("FAIL: the record changed\n"), 1;
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      std::printf("RECORD %s later_call_ms=%lld line=%s\n", canonical(r).c_str(),
                  static_cast<long long>(ms), line.c_str());
      std::fflush(stdout);
      return 1;
    }
    if (!verify(v, spark_size(comm), it)) wrong(rank, it);
    if (rank == victim && it == 1) {
      ::raise(SIGSTOP);
      for (;;) ::pause();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGTERM, SIG_IGN);
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i, int def) { return argc > i ? std::atoi(argv[i]) : def; };
  try {
    if (mode == "kill") return run_stream(mode, -1, 0, arg(2, 1), 0);
    if (mode == "stop")
      return run_stream(mode, arg(2, 1), arg(3, 5), 0, static_cast<std::uint32_t>(arg(4, 0)));
    if (mode == "healthy") return run_stream(mode, -1, arg(2, 10), 0, 0);
    if (mode == "late") return run_late(arg(2, 2000));
    if (mode == "mixed") return run_mixed(arg(2, 30), static_cast<std::size_t>(arg(3, 65536)));
    if (mode == "skew" && argc > 2) return run_skew(std::string(argv[2]) == "barrier", arg(3, 600));
    if (mode == "api" && argc > 2)
      return std::string(argv[2]) == "c" ? run_api_c(arg(3, 1)) : run_api_cpp(arg(3, 1));
  } catch (const spark::CommFailure& e) {
    std::printf("fault_stream %s\n", e.what());  // only with SPARK_ON_FAILURE=raise
    return 1;
  } catch (const std::exception& e) {
    std::printf("fault_stream: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: fault_stream kill SEED | stop VICTIM K [MS] | api c|cpp VICTIM | healthy N "
               "| skew barrier|none MS | late MS | mixed ROUNDS [COUNT]\n");
  return 2;
}
