// The fail-stop record: who waited on whom, where, and for how long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "spark/failure_record.h"

namespace spark {

enum class FailureCause : std::uint8_t {
  timeout = SPARK_CAUSE_TIMEOUT,          ///< no data from the peer within SPARKNET_ROCE_TIMEOUT_MS
  peer_closed = SPARK_CAUSE_PEER_CLOSED,  ///< the peer's connection closed or its process is gone
  peer_error = SPARK_CAUSE_PEER_ERROR,    ///< a transport error (e.g. a verbs error completion)
  remote_abort = SPARK_CAUSE_REMOTE_ABORT,  ///< another rank failed and the group is being aborted
  mismatch = SPARK_CAUSE_MISMATCH,  ///< ranks called different collectives at one sequence number
};

/// The record's fields and layout are spark/failure_record.h's (shared with the C API and the
/// GPU kernels): rank, peer, seq, step, waited_ms, timeout_ms, cause, time_unix_ns, lane, op,
/// detail.
struct FailureRecord {
#define SPARK_FAILURE_RECORD_CXX_FIELD(type, name, array, init) type name array = init;
  SPARK_FAILURE_RECORD_FIELDS(SPARK_FAILURE_RECORD_CXX_FIELD, FailureCause)
#undef SPARK_FAILURE_RECORD_CXX_FIELD
};
#define SPARK_FAILURE_RECORD_SAME(type, name, array, init)                               \
  static_assert(offsetof(FailureRecord, name) == offsetof(spark_failure_record, name) && \
                    sizeof(FailureRecord::name) == sizeof(spark_failure_record::name),   \
                "spark::FailureRecord::" #name " differs from spark/failure_record.h");
SPARK_FAILURE_RECORD_FIELDS(SPARK_FAILURE_RECORD_SAME, FailureCause)
#undef SPARK_FAILURE_RECORD_SAME
static_assert(sizeof(FailureRecord) == sizeof(spark_failure_record));

/// The one-line report, e.g.
/// "rank 0: allreduce seq 42 step 1: no data from rank 2 on lane tcp:1 after 10000 ms (timeout
/// 10000 ms)"
std::string to_string(const FailureRecord& record);

}  // namespace spark
