// The C++ side of bench/vs_gloo.py's "Python vs C++" row: the same loop the Python ranks run
// (f32 allreduce in place, warm-up, then every call timed alone with steady_clock), so the
// two medians differ only by what the Python layer adds. Built by vs_gloo.py, not by CMake.
//   sparkrun -n 2 allreduce_loop BYTES ITERS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "spark/spark.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: allreduce_loop BYTES ITERS\n");
    return 2;
  }
  const std::size_t count = std::strtoull(argv[1], nullptr, 10) / 4;
  const int iters = std::atoi(argv[2]);
  auto comm = spark::init();
  std::vector<float> buf(count, 1.0f);
  for (int i = 0; i < iters / 10 + 10; ++i)
    comm.allreduce(buf.data(), buf.data(), count, spark::DType::f32, spark::ReduceOp::sum);
  std::vector<double> us(static_cast<std::size_t>(iters));
  for (auto& t : us) {
    const auto t0 = std::chrono::steady_clock::now();
    comm.allreduce(buf.data(), buf.data(), count, spark::DType::f32, spark::ReduceOp::sum);
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(us.begin(), us.end());
  if (comm.rank() == 0) std::printf("cpp median_us %.2f\n", us[us.size() / 2]);
  return 0;
}
