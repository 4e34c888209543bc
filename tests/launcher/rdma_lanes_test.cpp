// When the launcher resolves SPARK_IB_HCA / NCCL_IB_HCA (node/binding.cpp): only when the
// node's ranks may use RDMA lanes.
#include <gtest/gtest.h>

#include "binding.hpp"

namespace spark::launch {
namespace {

TEST(RdmaLanes, UsedOnlyByRoceOrAutoAcrossNodesWithANic) {
  EXPECT_EQ(why_no_rdma_lanes("roce", 1, false), "");  // forced: checked even on one node
  EXPECT_EQ(why_no_rdma_lanes("roce", 2, true), "");
  EXPECT_EQ(why_no_rdma_lanes("auto", 2, true), "");
  EXPECT_EQ(why_no_rdma_lanes("auto", 8, true), "");
  EXPECT_EQ(why_no_rdma_lanes("tcp", 2, true), "SPARK_TRANSPORT=tcp");
  EXPECT_EQ(why_no_rdma_lanes("shm", 1, true), "SPARK_TRANSPORT=shm");
  EXPECT_EQ(why_no_rdma_lanes("auto", 1, true), "one node: its ranks use shared memory");
  EXPECT_EQ(why_no_rdma_lanes("auto", 2, false), "this machine has no RDMA NIC");
}

}  // namespace
}  // namespace spark::launch
