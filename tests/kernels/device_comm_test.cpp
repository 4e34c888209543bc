// spark::cuda::DeviceComm through the real libspark (singleton communicator). The error tests
// run everywhere (label unit); the device-buffer tests need a GPU (label gpu, else skipped).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "spark/cuda.hpp"
#include "spark/spark.hpp"

#if defined(SPARK_TEST_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

bool gpu_usable() {
#if defined(SPARK_TEST_WITH_CUDA)
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

std::string message_of(spark::Communicator& comm) {
  try {
    spark::cuda::DeviceComm dev(comm);
  } catch (const spark::InvalidUsage& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceCommErrors, ClearErrorWithoutCudaBuildOrGpu) {
  if (gpu_usable()) GTEST_SKIP() << "a GPU is usable here: the error path is not reachable";
  auto comm = spark::init();
  const std::string msg = message_of(comm);
  if (spark::cuda::built_with_cuda()) {
    EXPECT_EQ(msg.rfind("no CUDA device (", 0), 0u) << msg;
    EXPECT_NE(msg.find("pass host buffers"), std::string::npos) << msg;
  } else {
    EXPECT_EQ(msg.rfind("device pointer passed but libspark was built without CUDA", 0), 0u) << msg;
  }
  int host = 0;
  EXPECT_FALSE(spark::cuda::is_device_pointer(&host));
  EXPECT_FALSE(spark::cuda::is_device_pointer(nullptr));
}

#if defined(SPARK_TEST_WITH_CUDA)
struct Dev {
  explicit Dev(std::size_t bytes) { cudaMalloc(&p, bytes); }
  ~Dev() { cudaFree(p); }
  void* p = nullptr;
};

TEST(DeviceCommGpu, SingletonAllreduceAndChecks) {
  if (!gpu_usable()) GTEST_SKIP() << "no CUDA device: needs an NVIDIA GPU and driver";
  auto comm = spark::init();
  spark::cuda::DeviceComm dev(comm, 1 << 16);
  EXPECT_TRUE(spark::cuda::built_with_cuda());
  std::vector<float> in(1000), out(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  Dev d(in.size() * 4);
  ASSERT_EQ(cudaMemcpy(d.p, in.data(), in.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_TRUE(spark::cuda::is_device_pointer(d.p));
  dev.allreduce(d.p, d.p, in.size(), spark::DType::f32, spark::ReduceOp::sum, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), d.p, in.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out, in);  // one rank: the sum is the input
  EXPECT_FALSE(dev.failure().has_value());
  // Larger than max_bytes (64 KiB): 61 chunks of 16384 floats plus an odd tail, in place and
  // out of place; one rank, so every element must come back unchanged at its own offset.
  const std::size_t big = 1'000'003;
  std::vector<float> bin(big), bout(big);
  for (std::size_t i = 0; i < big; ++i) bin[i] = static_cast<float>(i % 4099) - 7.25f;
  Dev bd(big * 4), bo(big * 4);
  ASSERT_EQ(cudaMemcpy(bd.p, bin.data(), big * 4, cudaMemcpyHostToDevice), cudaSuccess);
  dev.allreduce(bd.p, bo.p, big, spark::DType::f32, spark::ReduceOp::sum, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(bout.data(), bo.p, big * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(bout, bin);
  dev.allreduce(bd.p, bd.p, big, spark::DType::f32, spark::ReduceOp::max, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(bout.data(), bd.p, big * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(bout, bin);
  // synchronize() waits for what was enqueued (no cudaDeviceSynchronize by the caller), on
  // the legacy stream and on a stream of its own; a host collective is safe afterwards.
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  dev.allreduce(bd.p, bo.p, big, spark::DType::f32, spark::ReduceOp::min, nullptr);
  dev.allreduce(d.p, d.p, in.size(), spark::DType::f32, spark::ReduceOp::sum, side);
  dev.synchronize();
  EXPECT_EQ(cudaStreamQuery(side), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(nullptr), cudaSuccess);
  comm.barrier();
  dev.synchronize();  // nothing pending: returns at once
  cudaStreamDestroy(side);
  dev.set_timeout_ms(1234);
  EXPECT_EQ(dev.timeout_ms(), 1234u);
  EXPECT_EQ(comm.timeout_ms(), 1234u);
  comm.set_timeout_ms(777);  // the communicator mirrors it into the control block
  EXPECT_EQ(dev.timeout_ms(), 777u);
}
#endif

}  // namespace
