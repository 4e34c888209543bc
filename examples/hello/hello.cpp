// The demo: every rank says hello, then the ranks allreduce their rank numbers and check the
// sum. Run it with `sparkrun -n 3 build/examples/hello`, or by hand with the env rendezvous:
//   SPARK_SIZE=2 SPARK_RENDEZVOUS=127.0.0.1:29500 SPARK_RANK=0 build/examples/hello &
//   SPARK_SIZE=2 SPARK_RENDEZVOUS=127.0.0.1:29500 SPARK_RANK=1 build/examples/hello
#include <cstdio>
#include <exception>
#include <vector>

#include "spark/spark.hpp"

int main() {
  try {
    spark::Communicator comm = spark::init();
    const int rank = comm.rank(), size = comm.size();
    std::printf("hello from rank %d of %d on %s (transport %s)\n", rank, size,
                comm.node_id().c_str(), comm.transports().c_str());
    std::fflush(stdout);

    std::vector<float> v(1024, static_cast<float>(rank));
    comm.allreduce(v.data(), v.data(), v.size(), spark::DType::f32, spark::ReduceOp::sum);
    const float expected = static_cast<float>(size) * static_cast<float>(size - 1) / 2.0f;
    for (float x : v) {
      if (x != expected) {
        std::fprintf(stderr, "rank %d: allreduce gave %g, expected %g\n", rank,
                     static_cast<double>(x), static_cast<double>(expected));
        return 1;
      }
    }
    if (rank == 0)
      std::printf("allreduce of ranks 0..%d: sum %g (correct on every rank)\n", size - 1,
                  static_cast<double>(v[0]));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
  }
}
