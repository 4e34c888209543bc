// The transports libspark knows, one line each: SPARK_TRANSPORT's words and help (the knob
// table, config/src/knobs.cpp) and the factories of the transport registry
// (libspark/src/transport/registry.hpp) both come from this list, so a new transport is its
// folder in libspark and one line here.
#pragma once

// X(name, node_local, doc): name is the SPARK_TRANSPORT word, the bootstrap key "spark.<name>"
// and the factory transport::make_<name>; a node_local transport reaches only its node's ranks.
#define SPARK_TRANSPORTS(X)                                          \
  X(tcp, false, "TCP sockets, SPARK_TCP_LANES connections per peer") \
  X(shm, true, "shared memory, for ranks of the same node")          \
  X(roce, false, "RDMA WRITE over RoCE (ibverbs) on the SPARK_LANES / SPARK_IB_HCA devices")
