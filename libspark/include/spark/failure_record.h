/* The fail-stop record's layout, written once: spark::FailureRecord (failure.hpp, which asserts
 * every offset), the C API's spark_failure_record and the GPU control block's record are made
 * from this field list. Fixed layout, so a GPU kernel can write it in pinned host memory.
 * Strings are NUL-terminated and truncated to fit. */
#ifndef SPARK_FAILURE_RECORD_H
#define SPARK_FAILURE_RECORD_H

#include <stdint.h>

typedef enum spark_failure_cause {
  SPARK_CAUSE_TIMEOUT = 0,      /* no data from the peer within SPARKNET_ROCE_TIMEOUT_MS */
  SPARK_CAUSE_PEER_CLOSED = 1,  /* the peer's connection closed or its process is gone */
  SPARK_CAUSE_PEER_ERROR = 2,   /* a transport error (e.g. a verbs error completion) */
  SPARK_CAUSE_REMOTE_ABORT = 3, /* another rank failed and the group is being aborted */
  SPARK_CAUSE_MISMATCH = 4      /* ranks called different collectives at one sequence number */
} spark_failure_cause;

/* X(type, name, array, C++ default); CAUSE: uint8_t in C, spark::FailureCause in C++. */
#define SPARK_FAILURE_RECORD_FIELDS(X, CAUSE)                                   \
  X(int32_t, rank, , -1) /* the rank that detected the failure */               \
  X(int32_t, peer, , -1) /* the rank it was waiting on (or relaying through) */ \
  X(uint64_t, seq, , 0)  /* sequence number of the operation */                 \
  X(uint32_t, step, , 0) /* step inside the operation's algorithm */            \
  X(uint32_t, waited_ms, , 0)                                                   \
  X(uint32_t, timeout_ms, , 0)                                                  \
  X(CAUSE, cause, , {})         /* spark_failure_cause */                       \
  X(int64_t, time_unix_ns, , 0) /* wall-clock time of detection */              \
  X(char, lane, [32], {})       /* e.g. "tcp:1", "shm", "rocep1s0f0" */         \
  X(char, op, [24], {})         /* e.g. "allreduce" */                          \
  X(char, detail, [128], {})    /* cause-specific text (verbs status, errno text, ...) */

#define SPARK_FAILURE_RECORD_C_FIELD(type, name, array, init) type name array;
typedef struct spark_failure_record {
  SPARK_FAILURE_RECORD_FIELDS(SPARK_FAILURE_RECORD_C_FIELD, uint8_t)
} spark_failure_record;
#undef SPARK_FAILURE_RECORD_C_FIELD

#endif /* SPARK_FAILURE_RECORD_H */
