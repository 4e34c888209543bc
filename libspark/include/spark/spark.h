/* libspark C API: the same communicator as spark::Communicator, for C and other languages
 * (Python ctypes, Rust, ...). Every function returns a spark_result (SPARK_OK = 0) unless noted;
 * on an error, spark_last_error() returns the message (thread-local) that names the problem.
 *
 *   spark_comm* comm;
 *   if (spark_init(&comm) != SPARK_OK) { fprintf(stderr, "%s\n", spark_last_error()); exit(1); }
 *   spark_allreduce(comm, buf, buf, n, SPARK_F32, SPARK_SUM);
 *   spark_finalize(comm);
 */
#ifndef SPARK_SPARK_H
#define SPARK_SPARK_H

#include <stddef.h>
#include <stdint.h>

#include "spark/failure_record.h" /* spark_failure_record, spark_failure_cause */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spark_comm spark_comm;

typedef enum spark_result {
  SPARK_OK = 0,
  SPARK_ERR_INVALID = 1,     /* bad arguments or calls in the wrong order */
  SPARK_ERR_CONFIG = 2,      /* a SPARK_* / SPARKNET_* variable was refused */
  SPARK_ERR_BOOTSTRAP = 3,   /* ranks could not find each other */
  SPARK_ERR_COMM_FAILED = 4, /* the communicator failed (fail-stop); see spark_failure() */
  SPARK_ERR_INTERNAL = 5     /* anything else (out of memory, system errors) */
} spark_result;

/* Same values as spark::DType / spark::ReduceOp. */
typedef enum spark_dtype {
  SPARK_F32 = 0,
  SPARK_F64 = 1,
  SPARK_F16 = 2,
  SPARK_BF16 = 3,
  SPARK_I32 = 4,
  SPARK_I64 = 5,
  SPARK_U8 = 6
} spark_dtype;

typedef enum spark_reduce_op {
  SPARK_SUM = 0,
  SPARK_PROD = 1,
  SPARK_MIN = 2,
  SPARK_MAX = 3,
  SPARK_AVG = 4
} spark_reduce_op;

/* Finds the other ranks (PMIx, env rendezvous or singleton), connects, and returns after a
 * CPU-side barrier. On error *comm is NULL. */
int spark_init(spark_comm** comm);
/* Releases the communicator (NULL is ignored). Always SPARK_OK. */
int spark_finalize(spark_comm* comm);

/* MPI_Comm_split, collective over comm (bounded by its timeout): ranks with the same color >= 0
 * form one new communicator, ranked by key, then by rank in comm; a negative color sets *out to
 * NULL. The new one reuses comm's connections, has its own sequence numbers and timeout (comm's,
 * then settable), and is released with spark_comm_free before the world communicator is. A
 * failure in any communicator fails all of the rank's (the record's detail names it). */
int spark_comm_split(spark_comm* comm, int color, int key, spark_comm** out);
/* The same ranks in the same order as a separate communicator (collective). */
int spark_comm_dup(spark_comm* comm, spark_comm** out);
/* Releases a communicator made by spark_comm_split/spark_comm_dup (NULL is ignored). */
int spark_comm_free(spark_comm* comm);

/* -1 when comm is NULL. */
int spark_rank(const spark_comm* comm);
int spark_size(const spark_comm* comm);
int spark_local_rank(const spark_comm* comm);
int spark_local_size(const spark_comm* comm);

/* Collectives on host buffers; count in elements. recv may equal send (in place). */
int spark_allreduce(spark_comm* comm, const void* send, void* recv, size_t count, int dtype,
                    int op);
int spark_reduce_scatter(spark_comm* comm, const void* send, void* recv, size_t recv_count,
                         int dtype, int op);
int spark_allgather(spark_comm* comm, const void* send, void* recv, size_t send_count, int dtype);
int spark_broadcast(spark_comm* comm, void* buffer, size_t count, int dtype, int root);
int spark_alltoall(spark_comm* comm, const void* send, void* recv, size_t count, int dtype);
int spark_alltoallv(spark_comm* comm, const void* send, const size_t* send_counts,
                    const size_t* send_displs, void* recv, const size_t* recv_counts,
                    const size_t* recv_displs, int dtype);
int spark_send(spark_comm* comm, const void* buffer, size_t count, int dtype, int peer);
int spark_recv(spark_comm* comm, void* buffer, size_t count, int dtype, int peer);
/* Waits for every rank with SPARK_BARRIER_TIMEOUT_MS (long): call it after model loading. */
int spark_barrier(spark_comm* comm);

/* Deadline of every following wait on a peer, from any thread. */
int spark_set_timeout_ms(spark_comm* comm, uint32_t ms);
/* 0 when comm is NULL. */
uint32_t spark_timeout_ms(const spark_comm* comm);

/* 1 and *out filled when the communicator has failed, 0 when healthy, -1 on bad arguments. */
int spark_failure(const spark_comm* comm, spark_failure_record* out);
/* SPARK_OK, or SPARK_ERR_COMM_FAILED with the one-line report in spark_last_error(). */
int spark_check_health(const spark_comm* comm);
/* Writes the one-line report of *record into buf (always NUL-terminated when size > 0);
 * returns the report's full length, like snprintf, or -1 on bad arguments. */
int spark_format_failure(const spark_failure_record* record, char* buf, size_t size);

/* --- Collectives on GPU buffers (spark/cuda.hpp, docs/kernels.md) ---------------------
 * Without CUDA (spark_built_with_cuda() == 0) every call below except destroy fails with
 * SPARK_ERR_INVALID and "device pointer passed but libspark was built without CUDA: ..." in
 * spark_last_error(); without a usable GPU create fails with "no CUDA device (...)". */
typedef struct spark_device_comm spark_device_comm;
/* 1 when this libspark was built with CUDA, else 0. */
int spark_built_with_cuda(void);
/* max_bytes: the channel size, the largest device allreduce done in one kernel launch (0 =
 * 1 MiB); larger calls run as one launch per chunk. comm must outlive *out. */
int spark_device_comm_create(spark_comm* comm, size_t max_bytes, spark_device_comm** out);
/* NULL is ignored. */
int spark_device_comm_destroy(spark_device_comm* dev);
/* send/recv: device pointers (recv may equal send); stream: a cudaStream_t (NULL = legacy
 * default stream). Enqueues and returns at once; the result is ready when the stream is. */
int spark_allreduce_device(spark_device_comm* dev, const void* send, void* recv, size_t count,
                           int dtype, int op, void* stream);
/* Like spark_failure(): 1 and *out filled after a failure, 0 when healthy, -1 on bad args. */
int spark_device_failure(const spark_device_comm* dev, spark_failure_record* out);
/* Like spark_set_timeout_ms(); also read by kernels already captured in a graph. */
int spark_device_set_timeout_ms(spark_device_comm* dev, uint32_t ms);

/* Message of the last failed call in this thread ("" when none); valid until the next call
 * that fails in this thread. */
const char* spark_last_error(void);
/* sizeof(spark_failure_record) as compiled into the library (binding layout check). */
size_t spark_failure_record_size(void);
const char* spark_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPARK_SPARK_H */
