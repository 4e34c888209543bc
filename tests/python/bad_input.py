"""Rank program (2 ranks, SPARK_ON_FAILURE=raise): bad arguments give clear Python exceptions,
a size mismatch across ranks gives sparkrun.CommFailure on both, never a hang."""
import sys
import time

import numpy as np
import sparkrun

comm = sparkrun.init()
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
comm.check_health()  # argument errors do not fail the communicator
comm.allreduce(x)  # and it still works
if x[0] != comm.size:
    sys.exit(f"FAIL: allreduce after the refusals gave {x[0]}")

# Size mismatch across ranks: a CommFailure on every rank, quickly.
start = time.monotonic()
e = expect(sparkrun.CommFailure, "", lambda: comm.allreduce(np.ones(4 + 4 * r, np.float32)))
took = time.monotonic() - start
rec = e.record
print(f"rank {r}: record cause={rec.cause} op={rec.op} peer={rec.peer} after {took:.2f} s", flush=True)
if rec.cause not in ("mismatch", "remote_abort", "peer_closed") or took > 5:
    sys.exit(f"FAIL: unexpected record {rec} after {took:.2f} s")
if comm.failure() is None:
    sys.exit("FAIL: failure() is None after a CommFailure")
# Every call after a failure raises the same record at once.
e2 = expect(sparkrun.CommFailure, "", lambda: comm.barrier())
if str(e2) != str(e):
    sys.exit(f"FAIL: a later call raised a different record: {e2}")
expect(sparkrun.CommFailure, "", comm.check_health)
print(f"rank {r} ok", flush=True)
