// libspark: collectives over RoCE, tcp and shared memory, with fail-stop timeouts.
//
//   auto comm = spark::init();          // PMIx, env rendezvous or singleton, automatically
//   comm.barrier();                      // after long preparation
//   comm.allreduce(buf, buf, n, spark::DType::f32, spark::ReduceOp::sum);
#pragma once

#include <memory>

#include "spark/communicator.hpp"
#include "spark/error.hpp"
#include "spark/failure.hpp"
#include "spark/store.hpp"
#include "spark/types.hpp"
#include "spark/version.hpp"

namespace spark {

/// Finds the other ranks (PMIx client, then SPARK_RANK/SPARK_SIZE/SPARK_RENDEZVOUS or torchrun's
/// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, then singleton), connects transports, and returns
/// after a CPU-side barrier: every rank is connected. Throws spark::ConfigError or
/// spark::BootstrapError with a message naming the problem and the fix.
Communicator init();

/// The same over a key-value store the caller provides (torch's c10d Store): `rank` of `size`
/// ranks, each calling init with the same store (or the same key prefix of one). Node identity
/// and transports are as for init(); the group abort prints the record and exits the process
/// (a launcher sees a rank exit non-zero and stops the group). Throws like init().
Communicator init(std::shared_ptr<KeyValueStore> store, int rank, int size);

}  // namespace spark
