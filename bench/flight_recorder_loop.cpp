// bench/flight_recorder.py's rank program: f32 allreduces of BYTES in place after a warm-up,
// timed in batches of 100 calls (the recorder's cost is a few ns: below a per-call clock
// read's cost and resolution); the median batch is robust to the preemptions of a loaded
// machine. Rank 0 prints "ns_per_call X" (the median batch's time per call).
//   sparkrun -n 2 flight_recorder_loop BYTES ITERS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "spark/spark.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: flight_recorder_loop BYTES ITERS\n");
    return 2;
  }
  constexpr long kBatch = 100;
  const std::size_t count = std::strtoull(argv[1], nullptr, 10) / 4;
  const long batches = std::max(1L, std::atol(argv[2]) / kBatch);
  auto comm = spark::init();
  std::vector<float> buf(count, 0.0f);
  for (long i = 0; i < batches * kBatch / 10 + 1000; ++i)
    comm.allreduce(buf.data(), buf.data(), count, spark::DType::f32, spark::ReduceOp::sum);
  std::vector<double> ns(static_cast<std::size_t>(batches));
  for (auto& t : ns) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < kBatch; ++i)
      comm.allreduce(buf.data(), buf.data(), count, spark::DType::f32, spark::ReduceOp::sum);
    t = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
        kBatch;
  }
  std::sort(ns.begin(), ns.end());
  if (comm.rank() == 0) std::printf("ns_per_call %.1f\n", ns[ns.size() / 2]);
  return 0;
}
