// The C API (spark.h): a thin layer over spark::Communicator that turns exceptions into
// result codes and a thread-local message.
#include "spark/spark.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "spark/cuda.hpp"
#include "spark/spark.hpp"

struct spark_comm {
  spark::Communicator comm;
};

struct spark_device_comm {
  spark::cuda::DeviceComm d;
};

namespace {

thread_local std::string t_last_error;

static_assert(static_cast<int>(spark::DType::u8) == SPARK_U8);
static_assert(static_cast<int>(spark::ReduceOp::avg) == SPARK_AVG);

// One layout (spark/failure_record.h, every offset asserted in failure.hpp).
void to_c(const spark::FailureRecord& r, spark_failure_record& c) {
  c = std::bit_cast<spark_failure_record>(r);
}
spark::FailureRecord from_c(const spark_failure_record& c) {
  return std::bit_cast<spark::FailureRecord>(c);
}

int fail(int code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

// The failure queries return 1 with the record, 0 when healthy, -1 on an internal error
// (unlike guarded(), whose 0 means success).
template <class Query>
int copy_failure(Query query, spark_failure_record& out) {
  try {
    const auto record = query();
    if (!record) return 0;
    to_c(*record, out);
    return 1;
  } catch (const std::exception& e) {
    fail(SPARK_ERR_INTERNAL, e.what());
    return -1;
  }
}

// Runs fn, mapping every exception to a result code; nothing escapes into C.
template <class Fn>
int guarded(Fn&& fn) noexcept {
  try {
    fn();
    return SPARK_OK;
  } catch (const spark::CommFailure& e) {
    return fail(SPARK_ERR_COMM_FAILED, e.what());
  } catch (const spark::InvalidUsage& e) {
    return fail(SPARK_ERR_INVALID, e.what());
  } catch (const spark::ConfigError& e) {
    return fail(SPARK_ERR_CONFIG, e.what());
  } catch (const spark::BootstrapError& e) {
    return fail(SPARK_ERR_BOOTSTRAP, e.what());
  } catch (const std::bad_alloc&) {
    return fail(SPARK_ERR_INTERNAL, "libspark: out of memory");
  } catch (const std::exception& e) {
    return fail(SPARK_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(SPARK_ERR_INTERNAL, "libspark: unknown error");
  }
}

spark::DType to_dtype(int dtype, const char* fn) {
  if (dtype < SPARK_F32 || dtype > SPARK_U8) {
    throw spark::InvalidUsage(
        fmt::format("{}: dtype {} is not a spark_dtype (SPARK_F32..SPARK_U8 = 0..6)", fn, dtype));
  }
  return static_cast<spark::DType>(dtype);
}

spark::ReduceOp to_op(int op, const char* fn) {
  if (op < SPARK_SUM || op > SPARK_AVG) {
    throw spark::InvalidUsage(
        fmt::format("{}: op {} is not a spark_reduce_op (SPARK_SUM..SPARK_AVG = 0..4)", fn, op));
  }
  return static_cast<spark::ReduceOp>(op);
}

spark::Communicator& checked(spark_comm* comm, const char* fn) {
  if (comm == nullptr) throw spark::InvalidUsage(fmt::format("{}: comm is NULL", fn));
  return comm->comm;
}

}  // namespace

extern "C" {

int spark_init(spark_comm** comm) {
  if (comm == nullptr) return fail(SPARK_ERR_INVALID, "spark_init: comm is NULL");
  *comm = nullptr;
  return guarded([&] { *comm = new spark_comm{spark::init()}; });
}

int spark_finalize(spark_comm* comm) {
  delete comm;  // destructors never throw
  return SPARK_OK;
}

int spark_comm_split(spark_comm* comm, int color, int key, spark_comm** out) {
  if (out == nullptr) return fail(SPARK_ERR_INVALID, "spark_comm_split: out is NULL");
  *out = nullptr;
  return guarded([&] {
    auto sub = checked(comm, "spark_comm_split").split(color, key);
    if (sub) *out = new spark_comm{std::move(*sub)};
  });
}

int spark_comm_dup(spark_comm* comm, spark_comm** out) {
  if (out == nullptr) return fail(SPARK_ERR_INVALID, "spark_comm_dup: out is NULL");
  *out = nullptr;
  return guarded([&] { *out = new spark_comm{checked(comm, "spark_comm_dup").dup()}; });
}

int spark_comm_free(spark_comm* comm) {
  delete comm;  // destructors never throw
  return SPARK_OK;
}

int spark_rank(const spark_comm* comm) {
  return comm ? comm->comm.rank() : -1;
}
int spark_size(const spark_comm* comm) {
  return comm ? comm->comm.size() : -1;
}
int spark_local_rank(const spark_comm* comm) {
  return comm ? comm->comm.local_rank() : -1;
}
int spark_local_size(const spark_comm* comm) {
  return comm ? comm->comm.local_size() : -1;
}

int spark_allreduce(spark_comm* comm, const void* send, void* recv, size_t count, int dtype,
                    int op) {
  return guarded([&] {
    checked(comm, "spark_allreduce")
        .allreduce(send, recv, count, to_dtype(dtype, "spark_allreduce"),
                   to_op(op, "spark_allreduce"));
  });
}

int spark_reduce_scatter(spark_comm* comm, const void* send, void* recv, size_t recv_count,
                         int dtype, int op) {
  return guarded([&] {
    checked(comm, "spark_reduce_scatter")
        .reduce_scatter(send, recv, recv_count, to_dtype(dtype, "spark_reduce_scatter"),
                        to_op(op, "spark_reduce_scatter"));
  });
}

int spark_allgather(spark_comm* comm, const void* send, void* recv, size_t send_count, int dtype) {
  return guarded([&] {
    checked(comm, "spark_allgather")
        .allgather(send, recv, send_count, to_dtype(dtype, "spark_allgather"));
  });
}

int spark_broadcast(spark_comm* comm, void* buffer, size_t count, int dtype, int root) {
  return guarded([&] {
    checked(comm, "spark_broadcast")
        .broadcast(buffer, count, to_dtype(dtype, "spark_broadcast"), root);
  });
}

int spark_alltoall(spark_comm* comm, const void* send, void* recv, size_t count, int dtype) {
  return guarded([&] {
    checked(comm, "spark_alltoall").alltoall(send, recv, count, to_dtype(dtype, "spark_alltoall"));
  });
}

int spark_alltoallv(spark_comm* comm, const void* send, const size_t* send_counts,
                    const size_t* send_displs, void* recv, const size_t* recv_counts,
                    const size_t* recv_displs, int dtype) {
  return guarded([&] {
    checked(comm, "spark_alltoallv")
        .alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs,
                   to_dtype(dtype, "spark_alltoallv"));
  });
}

int spark_send(spark_comm* comm, const void* buffer, size_t count, int dtype, int peer) {
  return guarded([&] {
    checked(comm, "spark_send").send(buffer, count, to_dtype(dtype, "spark_send"), peer);
  });
}

int spark_recv(spark_comm* comm, void* buffer, size_t count, int dtype, int peer) {
  return guarded([&] {
    checked(comm, "spark_recv").recv(buffer, count, to_dtype(dtype, "spark_recv"), peer);
  });
}

int spark_barrier(spark_comm* comm) {
  return guarded([&] { checked(comm, "spark_barrier").barrier(); });
}

int spark_set_timeout_ms(spark_comm* comm, uint32_t ms) {
  return guarded([&] {
    if (ms == 0)
      throw spark::InvalidUsage("spark_set_timeout_ms: the timeout must be at least 1 ms");
    checked(comm, "spark_set_timeout_ms").set_timeout_ms(ms);
  });
}

uint32_t spark_timeout_ms(const spark_comm* comm) {
  return comm ? comm->comm.timeout_ms() : 0;
}

int spark_failure(const spark_comm* comm, spark_failure_record* out) {
  if (comm == nullptr || out == nullptr)
    return fail(SPARK_ERR_INVALID, "spark_failure: comm and out must not be NULL"), -1;
  return copy_failure([&] { return comm->comm.failure(); }, *out);
}

int spark_check_health(const spark_comm* comm) {
  return guarded([&] {
    if (comm == nullptr) throw spark::InvalidUsage("spark_check_health: comm is NULL");
    comm->comm.check_health();
  });
}

int spark_format_failure(const spark_failure_record* record, char* buf, size_t size) {
  if (record == nullptr || (buf == nullptr && size > 0)) {
    fail(SPARK_ERR_INVALID, "spark_format_failure: record is NULL (or buf NULL with size > 0)");
    return -1;
  }
  try {
    const std::string line = spark::to_string(from_c(*record));
    if (size > 0) {
      const std::size_t n = std::min(line.size(), size - 1);
      std::memcpy(buf, line.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int>(line.size());
  } catch (const std::exception& e) {
    fail(SPARK_ERR_INTERNAL, e.what());
    return -1;
  }
}

int spark_built_with_cuda(void) {
  return spark::cuda::built_with_cuda() ? 1 : 0;
}

int spark_device_comm_create(spark_comm* comm, size_t max_bytes, spark_device_comm** out) {
  return guarded([&] {
    if (out == nullptr) throw spark::InvalidUsage("spark_device_comm_create: out is NULL");
    *out = nullptr;
    spark::Communicator& c = checked(comm, "spark_device_comm_create");
    const std::size_t bytes = max_bytes == 0 ? std::size_t{1} << 20 : max_bytes;
    *out = new spark_device_comm{spark::cuda::DeviceComm(c, bytes)};
  });
}

int spark_device_comm_destroy(spark_device_comm* dev) {
  delete dev;  // ~DeviceComm does not throw
  return SPARK_OK;
}

int spark_allreduce_device(spark_device_comm* dev, const void* send, void* recv, size_t count,
                           int dtype, int op, void* stream) {
  return guarded([&] {
    if (dev == nullptr) throw spark::InvalidUsage("spark_allreduce_device: dev is NULL");
    dev->d.allreduce(send, recv, count, to_dtype(dtype, "spark_allreduce_device"),
                     to_op(op, "spark_allreduce_device"), static_cast<spark::cuda::Stream>(stream));
  });
}

int spark_device_failure(const spark_device_comm* dev, spark_failure_record* out) {
  if (dev == nullptr || out == nullptr)
    return fail(SPARK_ERR_INVALID, "spark_device_failure: dev or out is NULL"), -1;
  return copy_failure([&] { return dev->d.failure(); }, *out);
}

int spark_device_set_timeout_ms(spark_device_comm* dev, uint32_t ms) {
  return guarded([&] {
    if (dev == nullptr) throw spark::InvalidUsage("spark_device_set_timeout_ms: dev is NULL");
    dev->d.set_timeout_ms(ms);
  });
}

const char* spark_last_error(void) {
  return t_last_error.c_str();
}

size_t spark_failure_record_size(void) {
  return sizeof(spark_failure_record);
}

const char* spark_version(void) {
  return spark::kVersion;
}

}  // extern "C"
