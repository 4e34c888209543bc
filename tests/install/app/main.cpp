// A tiny application built against the installed libspark.
#include <spark/spark.hpp>

#include <cstdio>

int main() {
  auto comm = spark::init();
  int value = comm.rank() + 1;
  comm.allreduce(&value, &value, 1, spark::DType::i32, spark::ReduceOp::sum);
  std::printf("tiny_app: rank %d of %d sum %d\n", comm.rank(), comm.size(), value);
  return 0;
}
