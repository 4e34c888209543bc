"""Rank program: every collective x dtype from Python, checked against numpy; results must be
bit-identical across ranks. Run under `sparkrun -n N` (N = 1..3). Prints 'rank R ok' at the end."""
import sys

import numpy as np
import libspark

comm = libspark.init()
r, n = comm.rank, comm.size
DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8]
OPS = {libspark.SUM: "sum", libspark.PROD: "prod", libspark.MIN: "min", libspark.MAX: "max",
       libspark.AVG: "avg"}
SIZES = [1, 7, 1000, 70001]  # below and above the one-shot and piece sizes


def data(rank, dtype, count, tag, small=False):
    rng = np.random.default_rng([rank, count, tag, np.dtype(dtype).num])
    hi = 3 if small else 50
    if np.issubdtype(dtype, np.floating):
        return (rng.integers(1, hi + 1, count) * (0.5 if not small else 1.0)).astype(dtype)
    return rng.integers(1, hi + 1, count).astype(dtype)


def fold(arrays, name, dtype):
    acc = arrays[0].copy()
    for a in arrays[1:]:  # rank order, in the dtype, like libspark
        if name in ("sum", "avg"):
            acc = (acc + a).astype(dtype)
        elif name == "prod":
            acc = (acc * a).astype(dtype)
        elif name == "min":
            acc = np.minimum(acc, a)
        else:
            acc = np.maximum(acc, a)
    if name == "avg":
        acc = (acc / n).astype(dtype)
    return acc


def same_everywhere(x, what):
    """allgather the bytes: every rank must hold the same result."""
    b = np.frombuffer(np.ascontiguousarray(x).tobytes(), np.uint8)
    allb = np.empty(b.size * n, np.uint8)
    comm.allgather(b, allb)
    for p in range(n):
        if not np.array_equal(allb[p * b.size:(p + 1) * b.size], b):
            sys.exit(f"FAIL: {what}: rank {p}'s result differs from rank {r}'s")


def check(got, want, what, dtype):
    if np.issubdtype(dtype, np.floating):
        tol = 1e-2 if dtype == np.float16 else 1e-6
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        bad = np.flatnonzero(got != want)[:3]
        sys.exit(f"FAIL: rank {r}: {what}: got {got[bad]} want {want[bad]} at {bad}")


for dtype in DTYPES:
    dn = np.dtype(dtype).name
    for count in SIZES:
        for op, name in OPS.items():
            if name == "avg" and not np.issubdtype(dtype, np.floating):
                continue
            small = name == "prod"
            inputs = [data(p, dtype, count, 1, small) for p in range(n)]
            want = fold(inputs, name, dtype)
            out = np.empty_like(inputs[r])
            comm.allreduce(inputs[r], out, op=op)
            check(out, want, f"allreduce {name} {dn} x{count}", dtype)
            same_everywhere(out, f"allreduce {name} {dn} x{count}")
            inplace = inputs[r].copy()
            comm.allreduce(inplace, op=op)
            if not np.array_equal(inplace, out):
                sys.exit(f"FAIL: in-place allreduce {name} {dn} differs from out-of-place")
        # reduce_scatter
        sends = [data(p, dtype, count * n, 2) for p in range(n)]
        rs = np.empty(count, dtype)
        comm.reduce_scatter(sends[r], rs)
        check(rs, fold(sends, "sum", dtype)[r * count:(r + 1) * count], f"reduce_scatter {dn}", dtype)
        # allgather
        mine = data(r, dtype, count, 3)
        ag = np.empty(count * n, dtype)
        comm.allgather(mine, ag)
        check(ag, np.concatenate([data(p, dtype, count, 3) for p in range(n)]), f"allgather {dn}", dtype)
        # broadcast from every root
        for root in range(n):
            b = data(r, dtype, count, 4) if r == root else np.zeros(count, dtype)
            comm.broadcast(b, root=root)
            check(b, data(root, dtype, count, 4), f"broadcast root {root} {dn}", dtype)
        # alltoall: block p of rank q's send = data(q, tag 5 + p)
        send = np.concatenate([data(r, dtype, count, 5 + p) for p in range(n)])
        recv = np.empty_like(send)
        comm.alltoall(send, recv)
        check(recv, np.concatenate([data(q, dtype, count, 5 + r) for q in range(n)]), f"alltoall {dn}", dtype)
        # alltoallv: rank q sends (q + p + 1) elements to rank p
        sc = [r + p + 1 for p in range(n)]
        sd = list(np.cumsum([0] + sc[:-1]))
        send = np.concatenate([data(r, dtype, sc[p], 9 + p) for p in range(n)])
        rc = [q + r + 1 for q in range(n)]
        rd = list(np.cumsum([0] + rc[:-1]))
        recv = np.empty(sum(rc), dtype)
        comm.alltoallv(send, sc, [int(x) for x in sd], recv, rc, [int(x) for x in rd])
        check(recv, np.concatenate([data(q, dtype, rc[q], 9 + r) for q in range(n)]), f"alltoallv {dn}", dtype)
        # send/recv around the ring
        if n > 1:
            nxt, prv = (r + 1) % n, (r - 1) % n
            got = np.empty(count, dtype)
            if r % 2 == 0:
                comm.send(data(r, dtype, count, 12), nxt)
                comm.recv(got, prv)
            else:
                comm.recv(got, prv)
                comm.send(data(r, dtype, count, 12), nxt)
            check(got, data(prv, dtype, count, 12), f"send/recv {dn}", dtype)
# bytearray (u8 through the buffer protocol), then a barrier
ba = bytearray([r + 1] * 16)
comm.allreduce(ba)
if list(ba) != [sum(range(1, n + 1)) % 256] * 16:
    sys.exit(f"FAIL: bytearray allreduce gave {list(ba)}")
comm.barrier()
comm.check_health()
assert comm.failure() is None
print(f"rank {r} ok", flush=True)
