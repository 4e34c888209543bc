// A rank program for fail-stop tests under sparkrun:
//   fault_rank MODE VICTIM [ITERATIONS]
// Every rank runs init + barrier, then allreduces in a loop; rank VICTIM, after the first
// allreduce, does MODE: "kill" (SIGKILL itself), "stop" (SIGSTOP itself), "exit" (exit 3), or
// "none". Exits 0 when every allreduce was correct.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spark/spark.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fault_rank kill|stop|exit|none VICTIM [ITERATIONS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = std::atoi(argv[2]);
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 200;
  try {
    spark::Communicator comm = spark::init();
    comm.barrier();
    std::vector<float> v(4096);
    for (int it = 0; it < iterations; ++it) {
      for (auto& x : v) x = static_cast<float>(comm.rank() + 1);
      comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
      const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
      for (float x : v)
        if (x != want) {
          std::fprintf(stderr, "rank %d: wrong result %g\n", comm.rank(), static_cast<double>(x));
          return 1;
        }
      if (it == 0 && comm.rank() == victim) {
        if (mode == "kill") ::raise(SIGKILL);
        if (mode == "stop") ::raise(SIGSTOP);
        if (mode == "exit") std::_Exit(3);
      }
    }
    return 0;
  } catch (const spark::CommFailure& e) {
    std::fprintf(stderr, "fault_rank %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_rank: %s\n", e.what());
    return 1;
  }
}
