// A rank program for tests/observability, run under sparkrun:
//   observe_rank stream SECONDS      1 KiB allreduces for SECONDS (rank 0's clock), then exits 0
//   observe_rank stop VICTIM K       VICTIM SIGSTOPs itself after K allreduces; the others
//                                    wait for it in allreduce K+1 until their timeout
//   observe_rank mismatch VICTIM K   after K allreduces VICTIM calls broadcast where the others
//                                    call allreduce (a collective mismatch)
//   observe_rank slow VICTIM SECONDS like stream, but VICTIM sleeps 2 ms before each allreduce
//   observe_rank wide SECONDS        like stream with 4 MiB allreduces (whole pieces: a tcp
//                                    peer's lanes take turns)
// Prints "READY" on rank 0 once the first allreduce completed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "spark/spark.hpp"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int a = argc > 2 ? std::atoi(argv[2]) : 0;
  const int k = argc > 3 ? std::atoi(argv[3]) : 0;
  spark::Communicator comm = spark::init();
  std::vector<float> buf(mode == "wide" ? 1 << 20 : 256, 1.0f);
  const bool timed = mode == "stream" || mode == "slow" || mode == "wide";
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(mode == "slow" ? k : a);
  for (int it = 0;; ++it) {
    // Every rank leaves after the same allreduce: rank 0's "time is up" travels in the data.
    if (timed && buf[0] > 1.5f) break;
    if (timed) buf[0] = comm.rank() == 0 && std::chrono::steady_clock::now() >= end ? 2.0f : 1.0f;
    if (mode == "slow" && comm.rank() == a)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!timed && it == k && comm.rank() == a) {
      std::printf("DIVERGING rank %d after %d allreduces\n", a, k);
      std::fflush(stdout);
      if (mode == "stop") ::raise(SIGSTOP);
      if (mode == "mismatch") comm.broadcast(buf.data(), buf.size(), spark::DType::f32, 0);
    }
    comm.allreduce(buf.data(), buf.data(), buf.size(), spark::DType::f32, spark::ReduceOp::max);
    if (it == 0 && comm.rank() == 0) {
      std::printf("READY\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
