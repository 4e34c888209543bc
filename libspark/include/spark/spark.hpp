// libspark: collectives over RoCE, tcp and shared memory, with fail-stop timeouts.
//
//   auto comm = spark::init();          // PMIx, env rendezvous or singleton, automatically
//   comm.barrier();                      // after long preparation
//   comm.allreduce(buf, buf, n, spark::DType::f32, spark::ReduceOp::sum);
#pragma once

#include "spark/communicator.hpp"
#include "spark/error.hpp"
#include "spark/failure.hpp"
#include "spark/types.hpp"
#include "spark/version.hpp"

namespace spark {

/// Finds the other ranks (PMIx client, then SPARK_RANK/SPARK_SIZE/SPARK_RENDEZVOUS or torchrun's
/// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, then singleton), connects transports, and returns
/// after a CPU-side barrier: every rank is connected. Throws spark::ConfigError or
/// spark::BootstrapError with a message naming the problem and the fix.
Communicator init();

}  // namespace spark
