"""Rank program (2 ranks, SPARK_ON_FAILURE=raise): bad arguments give clear Python exceptions,
a size mismatch across ranks gives libspark.CommFailure on both, never a hang."""
import sys
import time

import numpy as np
import libspark

comm = libspark.init()
r = comm.rank


def expect(exc, fragment, f):
    try:
        f()
    except exc as e:
        if fragment not in str(e):
            sys.exit(f"FAIL: {exc.__name__} without '{fragment}': {e}")
        print(f"rank {r}: {exc.__name__}: {e}", flush=True)
        return e
    sys.exit(f"FAIL: no {exc.__name__} ({fragment})")


x = np.ones(8, np.float32)
expect(TypeError, "is not supported", lambda: comm.allreduce(np.ones(8, np.int16)))
expect(TypeError, "is not supported", lambda: comm.allreduce(np.ones(8, np.complex64)))
expect(TypeError, "buffer protocol", lambda: comm.allreduce([1.0, 2.0]))
expect(ValueError, "not contiguous", lambda: comm.allreduce(np.ones(16, np.float32)[::2]))
expect(ValueError, "not contiguous", lambda: comm.allreduce(np.ones((4, 4), np.float32).T))
expect(ValueError, "must be equal", lambda: comm.allreduce(x, np.empty(9, np.float32)))
expect(TypeError, "different dtypes", lambda: comm.allreduce(x, np.empty(8, np.float64)))
expect(ValueError, "read-only", lambda: comm.allreduce(np.frombuffer(b"\0" * 32, np.float32)))
expect(ValueError, "size * len(send)", lambda: comm.allgather(x, np.empty(8, np.float32)))
expect(ValueError, "out of range", lambda: comm.broadcast(x, root=5))


# GPU memory (__cuda_array_interface__, as CuPy arrays and CUDA tensors export it): refused
# with the reason everywhere but allreduce, which takes the device path. These objects describe
# host memory of a numpy array, so nothing here dereferences a bad address on any machine.
class GpuArray:
    def __init__(self, base, typestr="<f4", strides=None, readonly=False, shape=None):
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": shape or base.shape, "typestr": typestr, "strides": strides,
            "data": (base.ctypes.data, readonly), "version": 3, "stream": None}


g = np.ones(8, np.float32)
expect(TypeError, "only allreduce takes GPU buffers", lambda: comm.allgather(GpuArray(g), np.empty(16, np.float32)))
expect(TypeError, "only allreduce takes GPU buffers", lambda: comm.broadcast(GpuArray(g)))
expect(TypeError, "typestr '<c8' is not supported", lambda: comm.allreduce(GpuArray(g, "<c8")))
expect(TypeError, "typestr '>f4' is not supported", lambda: comm.allreduce(GpuArray(g, ">f4")))
expect(ValueError, "not contiguous", lambda: comm.allreduce(GpuArray(g, strides=(8,), shape=(4,))))
expect(ValueError, "read-only", lambda: comm.allreduce(GpuArray(g, readonly=True)))
expect(TypeError, "both be GPU memory or both host", lambda: comm.allreduce(GpuArray(g), np.empty(8, np.float32)))
expect(ValueError, "stream= is for GPU buffers", lambda: comm.allreduce(x, stream=7))
# A well-formed one: without a GPU (or without CUDA in the build) a clear InvalidUsage; on a
# GPU that cannot read this host memory, the same; where it can (GB10), the allreduce runs.
try:
    comm.allreduce(GpuArray(g))
    comm.barrier()  # waits for the device allreduce first
    if g[0] != comm.size:
        sys.exit(f"FAIL: device allreduce of host-readable memory gave {g[0]}")
    print(f"rank {r}: the device path ran (a GPU that reads host memory)", flush=True)
except libspark.InvalidUsage as e:
    if not any(f in str(e) for f in ("no CUDA device", "built without CUDA", "not GPU-accessible")):
        sys.exit(f"FAIL: device allreduce refused for an unexpected reason: {e}")
    print(f"rank {r}: InvalidUsage: {e} (built_with_cuda={libspark.built_with_cuda()})", flush=True)

comm.check_health()  # argument errors do not fail the communicator
comm.allreduce(x)  # and it still works
if x[0] != comm.size:
    sys.exit(f"FAIL: allreduce after the refusals gave {x[0]}")

# Size mismatch across ranks: a CommFailure on every rank, quickly.
start = time.monotonic()
e = expect(libspark.CommFailure, "", lambda: comm.allreduce(np.ones(4 + 4 * r, np.float32)))
took = time.monotonic() - start
rec = e.record
print(f"rank {r}: record cause={rec.cause} op={rec.op} peer={rec.peer} after {took:.2f} s", flush=True)
if rec.cause not in ("mismatch", "remote_abort", "peer_closed") or took > 5:
    sys.exit(f"FAIL: unexpected record {rec} after {took:.2f} s")
if comm.failure() is None:
    sys.exit("FAIL: failure() is None after a CommFailure")
# Every call after a failure raises the same record at once.
e2 = expect(libspark.CommFailure, "", lambda: comm.barrier())
if str(e2) != str(e):
    sys.exit(f"FAIL: a later call raised a different record: {e2}")
expect(libspark.CommFailure, "", comm.check_health)
print(f"rank {r} ok", flush=True)
