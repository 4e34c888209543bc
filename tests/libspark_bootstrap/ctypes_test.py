#!/usr/bin/python3
"""The C API from Python (ctypes), as a user of another language would use it.

    ctypes_test.py LIBSPARK singleton   init (one rank), allreduce, failure record, finalize
    ctypes_test.py LIBSPARK failure     two ranks over the env rendezvous; rank 1 exits after
                                        init, rank 0's allreduce fails and the record is read
Exits 0 on success; prints what differed otherwise.
"""
import ctypes
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from free_port import free_port  # noqa: E402

SPARK_OK, SPARK_ERR_INVALID, SPARK_ERR_CONFIG, SPARK_ERR_BOOTSTRAP, SPARK_ERR_COMM_FAILED = range(5)
SPARK_F32, SPARK_F64 = 0, 1
SPARK_SUM, SPARK_PROD, SPARK_MIN, SPARK_MAX, SPARK_AVG = range(5)
SPARK_CAUSE_TIMEOUT, SPARK_CAUSE_PEER_CLOSED = 0, 1


class FailureRecord(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int32),
        ("peer", ctypes.c_int32),
        ("seq", ctypes.c_uint64),
        ("step", ctypes.c_uint32),
        ("waited_ms", ctypes.c_uint32),
        ("timeout_ms", ctypes.c_uint32),
        ("cause", ctypes.c_uint8),
        ("time_unix_ns", ctypes.c_int64),
        ("lane", ctypes.c_char * 32),
        ("op", ctypes.c_char * 24),
        ("detail", ctypes.c_char * 128),
    ]


def load(path):
    lib = ctypes.CDLL(path)
    lib.spark_last_error.restype = ctypes.c_char_p
    lib.spark_version.restype = ctypes.c_char_p
    lib.spark_failure_record_size.restype = ctypes.c_size_t
    lib.spark_timeout_ms.restype = ctypes.c_uint32
    lib.spark_init.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    for name in ("spark_rank", "spark_size", "spark_local_rank", "spark_local_size",
                 "spark_finalize", "spark_check_health", "spark_timeout_ms"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.spark_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    lib.spark_set_timeout_ms.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.spark_failure.argtypes = [ctypes.c_void_p, ctypes.POINTER(FailureRecord)]
    lib.spark_format_failure.argtypes = [ctypes.POINTER(FailureRecord), ctypes.c_char_p,
                                         ctypes.c_size_t]
    return lib


def check(cond, what):
    if not cond:
        print("ctypes_test: FAILED: " + what, flush=True)
        sys.exit(1)


def clean_env():
    for name in list(os.environ):
        if name.startswith(("SPARK_", "SPARKNET_", "PMIX_")) or name in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT"):
            del os.environ[name]


def init(lib):
    comm = ctypes.c_void_p()
    rc = lib.spark_init(ctypes.byref(comm))
    check(rc == SPARK_OK, "spark_init returned %d: %s" % (rc, lib.spark_last_error()))
    return comm


def singleton(lib):
    clean_env()
    check(lib.spark_failure_record_size() == ctypes.sizeof(FailureRecord),
          "record size %d in the library, %d in Python" % (lib.spark_failure_record_size(),
                                                          ctypes.sizeof(FailureRecord)))
    comm = init(lib)
    check((lib.spark_rank(comm), lib.spark_size(comm)) == (0, 1), "rank/size of a singleton")
    check((lib.spark_local_rank(comm), lib.spark_local_size(comm)) == (0, 1), "local rank/size")
    values = [1.5, -2.0, 3.25, 0.0, 7.0]
    buf = (ctypes.c_float * 5)(*values)
    out = (ctypes.c_float * 5)()
    rc = lib.spark_allreduce(comm, buf, out, 5, SPARK_F32, SPARK_SUM)
    check(rc == SPARK_OK, "allreduce: %d %s" % (rc, lib.spark_last_error()))
    check(list(out) == values, "allreduce of one rank is the identity: %s" % list(out))
    rc = lib.spark_allreduce(comm, buf, buf, 5, SPARK_F32, SPARK_AVG)  # in place
    check(rc == SPARK_OK and list(buf) == values, "in-place avg")
    # Bad arguments: a code and a message, never a crash.
    rc = lib.spark_allreduce(comm, buf, out, 5, 42, SPARK_SUM)
    check(rc == SPARK_ERR_INVALID, "dtype 42 gave %d" % rc)
    check(lib.spark_last_error() ==
          b"spark_allreduce: dtype 42 is not a spark_dtype (SPARK_F32..SPARK_U8 = 0..6)",
          "message: %s" % lib.spark_last_error())
    check(lib.spark_allreduce(None, buf, out, 5, SPARK_F32, SPARK_SUM) == SPARK_ERR_INVALID,
          "NULL comm")
    check(lib.spark_set_timeout_ms(comm, 0) == SPARK_ERR_INVALID, "timeout 0 refused")
    check(lib.spark_set_timeout_ms(comm, 1234) == SPARK_OK, "set_timeout_ms")
    check(lib.spark_timeout_ms(comm) == 1234, "timeout_ms after set: %d" % lib.spark_timeout_ms(comm))
    record = FailureRecord()
    check(lib.spark_failure(comm, ctypes.byref(record)) == 0, "a healthy comm has no failure")
    check(lib.spark_check_health(comm) == SPARK_OK, "check_health of a healthy comm")
    check(lib.spark_failure(None, ctypes.byref(record)) == -1, "spark_failure(NULL)")
    # Formatting a record built in Python gives the contract's line.
    record = FailureRecord(rank=0, peer=2, seq=42, step=1, waited_ms=10000, timeout_ms=10000,
                           cause=SPARK_CAUSE_TIMEOUT, lane=b"tcp:1", op=b"allreduce")
    line = ctypes.create_string_buffer(256)
    n = lib.spark_format_failure(ctypes.byref(record), line, 256)
    expected = (b"rank 0: allreduce seq 42 step 1: no data from rank 2 on lane tcp:1 after "
                b"10000 ms (timeout 10000 ms)")
    check(line.value == expected and n == len(expected), "format: %r" % line.value)
    check(lib.spark_finalize(comm) == SPARK_OK, "finalize")
    # A refused variable surfaces as SPARK_ERR_CONFIG with the exact text.
    os.environ["SPARKNET_ROCE_SPIN_LIMIT"] = "100000"
    comm = ctypes.c_void_p()
    rc = lib.spark_init(ctypes.byref(comm))
    check(rc == SPARK_ERR_CONFIG and not comm.value, "SPIN_LIMIT gave %d" % rc)
    check(lib.spark_last_error().startswith(
        b"SPARKNET_ROCE_SPIN_LIMIT is set (\"100000\") but is no longer supported"),
        "message: %s" % lib.spark_last_error())
    del os.environ["SPARKNET_ROCE_SPIN_LIMIT"]
    print("ctypes_test: singleton ok (libspark %s)" % lib.spark_version().decode())


def rank_main(lib, rank):
    comm = init(lib)
    if rank == 1:
        os._exit(0)  # vanish after init, without finalize
    buf = (ctypes.c_float * 1024)(*([1.0] * 1024))
    rc = lib.spark_allreduce(comm, buf, buf, 1024, SPARK_F32, SPARK_SUM)
    check(rc == SPARK_ERR_COMM_FAILED, "allreduce with a dead peer returned %d" % rc)
    first = lib.spark_last_error()
    record = FailureRecord()
    check(lib.spark_failure(comm, ctypes.byref(record)) == 1, "spark_failure after the failure")
    check((record.rank, record.peer) == (0, 1), "record names rank 0 waiting on rank 1: %d %d"
          % (record.rank, record.peer))
    check(record.op == b"allreduce", "record op %r" % record.op)
    check(record.cause in (SPARK_CAUSE_TIMEOUT, SPARK_CAUSE_PEER_CLOSED), "cause %d" % record.cause)
    check(record.timeout_ms == 300, "timeout_ms %d" % record.timeout_ms)
    check(record.time_unix_ns > 0, "time of detection")
    line = ctypes.create_string_buffer(512)
    lib.spark_format_failure(ctypes.byref(record), line, 512)
    check(line.value == first, "C record formats to the C++ what(): %r vs %r" % (line.value, first))
    # Fail-stop: every later call fails at once with the same record.
    t0 = time.monotonic()
    rc = lib.spark_allreduce(comm, buf, buf, 1024, SPARK_F32, SPARK_SUM)
    check(rc == SPARK_ERR_COMM_FAILED and time.monotonic() - t0 < 0.2, "second call fails at once")
    check(lib.spark_last_error() == first, "same record on the next call")
    check(lib.spark_check_health(comm) == SPARK_ERR_COMM_FAILED, "check_health after failure")
    lib.spark_finalize(comm)
    print("ctypes_test: rank 0 read the record: " + first.decode(), flush=True)


def failure(lib_path):
    clean_env()
    port = free_port()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, SPARK_RANK=str(rank), SPARK_SIZE="2",
                   SPARK_RENDEZVOUS="127.0.0.1:%d" % port, SPARKNET_ROCE_TIMEOUT_MS="300",
                   SPARK_JOIN_TIMEOUT_MS="20000", SPARK_ON_FAILURE="raise",
                   SPARK_TRANSPORT="tcp")
        procs.append(subprocess.Popen([sys.executable, __file__, lib_path, "rank", str(rank)],
                                      env=env))
    codes = [p.wait(timeout=60) for p in procs]
    check(codes == [0, 0], "rank exit codes %s" % codes)


def main():
    lib_path, mode = sys.argv[1], sys.argv[2]
    if mode == "singleton":
        singleton(load(lib_path))
    elif mode == "failure":
        failure(lib_path)
    elif mode == "rank":
        rank_main(load(lib_path), int(sys.argv[3]))
    else:
        check(False, "unknown mode " + mode)


if __name__ == "__main__":
    main()
