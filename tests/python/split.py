"""Rank program (3 ranks): sub-communicators from Python, then a failure inside one.
split into {0: world ranks 2, 0 (key reverses the order)} and {1: rank 1}: sums, rank numbering,
every collective kind, dup, the default key, UNDEFINED -> None, a child outliving its parent's
Python object. Then world rank 2 stops itself (SIGSTOP) and rank 0's allreduce in their
sub-communicator times out after the sub's own 500 ms: the record names the communicator and
sparkrun ends the whole job (rank 1 waits in a sleep it never finishes)."""
import gc
import os
import signal
import sys
import time

import numpy as np
import libspark


def check(ok, what):
    if not ok:
        print(f"FAIL: rank {r}: {what}", flush=True)
        sys.exit(1)


comm = libspark.init()
r, n = comm.rank, comm.size
check(n == 3, f"run with 3 ranks, not {n}")

color = 1 if r == 1 else 0
sub = comm.split(color, key=-r)  # color 0: world rank 2 is rank 0, world rank 0 is rank 1
want_rank = {0: 1, 1: 0, 2: 0}[r]
check((sub.rank, sub.size) == (want_rank, 2 if color == 0 else 1),
      f"split gave rank {sub.rank} of {sub.size}")
check(sub.name == f"comm 1 (color {color}, size {sub.size})", f"name {sub.name!r}")
x = np.array([r + 1, 10 * (r + 1)], np.float64)
sub.allreduce(x)
check(list(x) == ([4.0, 40.0] if color == 0 else [2.0, 20.0]), f"allreduce in the sub gave {x}")
members = sub.allgather(np.array([r], np.int32), np.empty(sub.size, np.int32))
check(list(members) == ([2, 0] if color == 0 else [1]), f"sub rank order {list(members)}")
b = sub.broadcast(np.array([r], np.int64), root=0)
check(b[0] == (2 if color == 0 else 1), f"broadcast from sub rank 0 gave {b[0]}")
if color == 0:  # sub ranks: peer numbers are the sub's
    buf = np.array([float(r)], np.float32)
    if sub.rank == 0:
        sub.send(buf, 1)
    else:
        check(sub.recv(buf, 0)[0] == 2.0, f"recv from sub rank 0 gave {buf[0]}")
sub.barrier()
check(sub.failure() is None, "failure() is not None while healthy")
sub.check_health()
check(sub.timeout_ms == comm.timeout_ms, "the sub did not inherit the timeout")

d = comm.dup()
check((d.rank, d.size) == (r, n) and d.name == "comm 2 (dup, size 3)", f"dup {d!r}")
check(d.allreduce(np.array([r], np.int32))[0] == 3, "allreduce in the dup")
same = comm.split(0)  # default key: the rank, so the world's order
check(same.rank == r and same.size == 3, f"split(0) gave rank {same.rank}")
none = comm.split(libspark.UNDEFINED if r == 1 else 5)
check((none is None) == (r == 1), f"split(UNDEFINED) gave {none!r} on rank {r}")
check(none is None or none.allreduce(np.ones(1, np.float32))[0] == 2, "the size-2 split")
nested = d.split(0, key=-r)  # a split of a dup, then the dup's Python object goes first
d.close()
del d
gc.collect()
check(nested.name == "comm 2.1 (color 0, size 3)" and nested.rank == 2 - r, f"{nested!r}")
check(nested.allreduce(np.array([r], np.int32))[0] == 3, "the nested split after its parent")
print(f"rank {r} ok", flush=True)

# The failure: a sub-communicator whose world's Python object is already gone.
f = comm.split(libspark.UNDEFINED if r == 1 else 0, key=-r)
comm.close()
del comm, sub, same, none, nested
gc.collect()
if r == 1:
    time.sleep(60)  # ended by sparkrun's group abort
    check(False, "still running 60 s after the failure")
f.set_timeout_ms(500)  # the sub's own (SPARKNET_ROCE_TIMEOUT_MS is 20 s)
f.allreduce(np.ones(4, np.float32))
if r == 2:
    print(f"rank 2: stop now at {time.time():.3f}", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
f.allreduce(np.ones(4, np.float32))  # rank 0: times out, aborts the job
check(False, "the allreduce with a stopped peer returned")
