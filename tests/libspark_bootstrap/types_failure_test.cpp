// dtype/op names and sizes, and the exact one-line failure reports.
#include <gtest/gtest.h>

#include <cstring>

#include "spark/error.hpp"
#include "spark/failure.hpp"
#include "spark/types.hpp"

namespace {

using spark::DType;
using spark::FailureCause;
using spark::FailureRecord;
using spark::ReduceOp;

TEST(Types, SizesAndNamesRoundTrip) {
  const std::pair<DType, std::size_t> all[] = {{DType::f32, 4},  {DType::f64, 8}, {DType::f16, 2},
                                               {DType::bf16, 2}, {DType::i32, 4}, {DType::i64, 8},
                                               {DType::u8, 1}};
  for (auto [dtype, size] : all) {
    EXPECT_EQ(spark::dtype_size(dtype), size) << spark::to_string(dtype);
    EXPECT_EQ(spark::parse_dtype(spark::to_string(dtype)), dtype);
  }
  EXPECT_EQ(spark::parse_dtype("float"), DType::f32);
  EXPECT_EQ(spark::parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(spark::parse_dtype("double"), DType::f64);
  for (auto op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg}) {
    EXPECT_EQ(spark::parse_reduce_op(spark::to_string(op)), op);
  }
}

TEST(Types, ParsingIsStrict) {
  try {
    (void)spark::parse_dtype("f32 ");
    FAIL() << "accepted \"f32 \"";
  } catch (const spark::InvalidUsage& e) {
    EXPECT_STREQ(e.what(),
                 "unknown dtype \"f32 \": use one of f32 (float, float32), f64 (double, float64), "
                 "f16 (half, float16), bf16 (bfloat16), i32 (int, int32), i64 (int64), u8 "
                 "(uint8)");
  }
  EXPECT_THROW((void)spark::parse_dtype(""), spark::InvalidUsage);
  try {
    (void)spark::parse_reduce_op("SUM");
    FAIL() << "accepted \"SUM\"";
  } catch (const spark::InvalidUsage& e) {
    EXPECT_STREQ(e.what(), "unknown reduction op \"SUM\": use one of sum, prod, min, max, avg");
  }
}

FailureRecord record(FailureCause cause, const char* detail = "") {
  FailureRecord r;
  r.rank = 0;
  r.peer = 2;
  r.seq = 42;
  r.step = 1;
  r.waited_ms = 10000;
  r.timeout_ms = 10000;
  r.cause = cause;
  std::strncpy(r.lane, "tcp:1", sizeof r.lane - 1);
  std::strncpy(r.op, "allreduce", sizeof r.op - 1);
  std::strncpy(r.detail, detail, sizeof r.detail - 1);
  return r;
}

TEST(Failure, TimeoutLineIsExact) {
  EXPECT_EQ(spark::to_string(record(FailureCause::timeout)),
            "rank 0: allreduce seq 42 step 1: no data from rank 2 on lane tcp:1 after 10000 ms "
            "(timeout 10000 ms)");
}

TEST(Failure, OtherCauses) {
  auto closed = record(FailureCause::peer_closed, "connection reset by peer");
  closed.waited_ms = 12;
  EXPECT_EQ(spark::to_string(closed),
            "rank 0: allreduce seq 42 step 1: rank 2 closed its connection on lane tcp:1 after "
            "12 ms (connection reset by peer)");
  EXPECT_EQ(spark::to_string(record(FailureCause::peer_error, "IBV_WC_RETRY_EXC_ERR")),
            "rank 0: allreduce seq 42 step 1: transport error with rank 2 on lane tcp:1 "
            "(IBV_WC_RETRY_EXC_ERR)");
  EXPECT_EQ(spark::to_string(record(FailureCause::remote_abort, "rank 2 timed out")),
            "rank 0: allreduce seq 42 step 1: aborted because rank 2 failed (rank 2 timed out)");
  EXPECT_EQ(spark::to_string(record(FailureCause::mismatch,
                                    "rank 0 called allreduce(f32, 1024), rank 2 called "
                                    "broadcast(f32, 1024, root 0)")),
            "rank 0: allreduce seq 42 step 1: mismatched collective with rank 2 (rank 0 called "
            "allreduce(f32, 1024), rank 2 called broadcast(f32, 1024, root 0))");
}

TEST(Failure, UnterminatedFieldsAreNotOverread) {
  auto r = record(FailureCause::timeout);
  std::memset(r.lane, 'x', sizeof r.lane);  // no NUL, as a faulty writer might leave it
  const auto line = spark::to_string(r);
  EXPECT_NE(line.find("on lane " + std::string(sizeof r.lane, 'x') + " after"), std::string::npos)
      << line;
  FailureRecord empty;
  EXPECT_EQ(spark::to_string(empty),
            "rank -1: operation seq 0 step 0: no data from a peer after 0 ms (timeout 0 ms)");
}

TEST(Failure, CommFailureCarriesTheLine) {
  const spark::CommFailure e(record(FailureCause::timeout));
  EXPECT_STREQ(e.what(),
               "rank 0: allreduce seq 42 step 1: no data from rank 2 on lane tcp:1 after 10000 ms "
               "(timeout 10000 ms)");
  EXPECT_EQ(e.record().seq, 42u);
}

}  // namespace
