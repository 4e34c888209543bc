"""Every torch.distributed collective on CPU tensors through backend "spark", each checked
against the same call through gloo in the same job (torch 2.x). Run under `sparkrun -n N`.
Prints 'rank R ok' at the end; any difference exits non-zero naming the call."""
import sys

import torch
import torch.distributed as dist

import libspark.torch  # noqa: F401  (registers "spark")

dist.init_process_group("spark")
rank, n = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(backend="gloo")
spark = dist.group.WORLD
assert dist.get_backend(spark) == "spark", dist.get_backend(spark)


def fail(what):
    print(f"FAIL: rank {rank}: {what}", flush=True)
    sys.exit(1)


def same(a, b, what, exact):
    if isinstance(a, (list, tuple)):
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]", exact)
        return
    if a.dtype != b.dtype or a.shape != b.shape:
        fail(f"{what}: {a.dtype}{tuple(a.shape)} vs gloo {b.dtype}{tuple(b.shape)}")
    # Sums of 3+ operands may round in another order than gloo's: a few units in the last place.
    tol = {torch.bfloat16: 0.05, torch.float16: 0.01}.get(a.dtype, 1e-5)
    ok = torch.equal(a, b) if exact else torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    if not ok:
        fail(f"{what}: differs from gloo by {(a.double() - b.double()).abs().max().item()}")


def both(what, fn, exact=True):
    """fn(group) -> result; the same call through spark and through gloo must agree."""
    got, want = fn(spark), fn(gloo)
    same(got, want, what, exact)


def data(shape, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


# Reductions: every dtype x op; gloo has no AVG, so AVG is checked against SUM / n.
dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
ops = [dist.ReduceOp.SUM, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]
for dt in dtypes:
    exact = not dt.is_floating_point or n <= 2  # two operands: the order cannot differ
    for op in ops:
        def reduce_all(g, dt=dt, op=op):
            t = data((37,), dt, 1) if op != dist.ReduceOp.PRODUCT else (data((37,), dt, 1) % 3 + 1)
            dist.all_reduce(t, op=op, group=g)
            return t
        both(f"all_reduce {dt} {op}", reduce_all, exact)
    if dt.is_floating_point:
        t = data((37,), dt, 2)
        s = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG, group=spark)
        dist.all_reduce(s, op=dist.ReduceOp.SUM, group=gloo)
        same(t, s / n, f"all_reduce {dt} AVG", exact=False)

# PREMUL_SUM (torch passes it for FSDP's gradient scaling): factor * x summed.
t = data((16,), torch.float32, 3)
s = t * 0.25
dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.25), group=spark)
dist.all_reduce(s, group=gloo)
same(t, s, "all_reduce PREMUL_SUM", exact=False)

for dt in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
    def bcast(g, dt=dt):
        t = data((9,), dt, 4)
        dist.broadcast(t, src=n - 1, group=g)
        return t
    both(f"broadcast {dt}", bcast)
# Any dtype moves as bytes: bool from the last rank.
t = data((9,), torch.int32, 4) > 0
dist.broadcast(t, src=n - 1)
g = torch.Generator().manual_seed(1000 * (n - 1) + 4)
same(t, torch.randint(-50, 50, (9,), generator=g).to(torch.int32) > 0, "broadcast bool", True)


def all_gather(g):
    out = [torch.empty(5, 3) for _ in range(n)]
    dist.all_gather(out, data((5, 3), torch.float32, 5), group=g)
    return out


both("all_gather", all_gather)


def all_gather_into_tensor(g):
    out = torch.empty(n * 4, 2, dtype=torch.float16)
    dist.all_gather_into_tensor(out, data((4, 2), torch.float16, 6), group=g)
    return out


both("all_gather_into_tensor", all_gather_into_tensor)


def reduce_scatter(g):
    out = torch.empty(6)
    dist.reduce_scatter(out, [data((6,), torch.float32, 7 + r) for r in range(n)], group=g)
    return out


def reduce_scatter_tensor(g):
    out = torch.empty(3, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, data((3 * n,), torch.int64, 8), group=g)
    return out


# gloo's reduce_scatter on CPU exists from torch 2.x on; compare with an all_reduce + slice
# where it does not.
def via_all_reduce(full, rows):
    dist.all_reduce(full, group=gloo)
    return full.view(n, -1)[rank].reshape(rows)


t = torch.empty(6)
dist.reduce_scatter(t, [data((6,), torch.float32, 7 + r) for r in range(n)], group=spark)
same(t, via_all_reduce(torch.cat([data((6,), torch.float32, 7 + r) for r in range(n)]), (6,)),
     "reduce_scatter", exact=n <= 2)
t = reduce_scatter_tensor(spark)
same(t, via_all_reduce(data((3 * n,), torch.int64, 8), (3,)), "reduce_scatter_tensor", True)

# all_to_all_single with uneven splits: rank r sends r + p + 1 rows to rank p.
in_splits = [rank + p + 1 for p in range(n)]
out_splits = [p + rank + 1 for p in range(n)]


def all_to_all_single(g):
    out = torch.empty(sum(out_splits), 2, dtype=torch.float64)
    dist.all_to_all_single(out, data((sum(in_splits), 2), torch.float64, 9),
                           output_split_sizes=out_splits, input_split_sizes=in_splits, group=g)
    return out


both("all_to_all_single uneven", all_to_all_single)


def all_to_all_single_even(g):
    out = torch.empty(2 * n, dtype=torch.int32)
    dist.all_to_all_single(out, data((2 * n,), torch.int32, 10), group=g)
    return out


both("all_to_all_single even", all_to_all_single_even)


def all_to_all(g):
    out = [torch.empty(p + 1) for p in range(n)]
    dist.all_to_all(out, [data((rank + 1,), torch.float32, 11 + p) for p in range(n)], group=g)
    return out


# gloo has no all_to_all of tensor lists: what rank p sent this rank, made here.
want = [torch.randn((p + 1,), generator=torch.Generator().manual_seed(1000 * p + 11 + rank))
        for p in range(n)]
same(all_to_all(spark), want, "all_to_all", True)


def reduce(g):
    t = data((7,), torch.float64, 12)
    dist.reduce(t, dst=0, group=g)
    return t if rank == 0 else torch.zeros(1)  # elsewhere torch leaves the tensor unspecified


both("reduce", reduce, exact=n <= 2)


def gather(g):
    out = [torch.empty(4) for _ in range(n)] if rank == 0 else None
    dist.gather(data((4,), torch.float32, 13), out, dst=0, group=g)
    return out if rank == 0 else torch.zeros(1)


both("gather", gather)


def scatter(g):
    out = torch.empty(3, dtype=torch.int64)
    dist.scatter(out, [data((3,), torch.int64, 14 + p) for p in range(n)] if rank == n - 1 else None,
                 src=n - 1, group=g)
    return out


both("scatter", scatter)

if n > 1:
    # send/recv around the ring, then batch_isend_irecv both ways at once.
    right, left = (rank + 1) % n, (rank - 1) % n
    if rank % 2 == 0:
        dist.send(data((5,), torch.float32, 15), dst=right)
        got = torch.empty(5)
        dist.recv(got, src=left)
    else:
        got = torch.empty(5)
        dist.recv(got, src=left)
        dist.send(data((5,), torch.float32, 15), dst=right)
    g = torch.Generator().manual_seed(1000 * left + 15)
    same(got, torch.randn((5,), generator=g), "send/recv", True)

    # Both neighbours at once, small.
    bufs = [torch.empty(5), torch.empty(5)]
    ops = [dist.P2POp(dist.isend, data((5,), torch.float32, 16), right),
           dist.P2POp(dist.isend, data((5,), torch.float32, 17), left),
           dist.P2POp(dist.irecv, bufs[0], left), dist.P2POp(dist.irecv, bufs[1], right)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    g = torch.Generator().manual_seed(1000 * left + 16)
    same(bufs[0], torch.randn((5,), generator=g), "batch_isend_irecv from left", True)
    g = torch.Generator().manual_seed(1000 * right + 17)
    same(bufs[1], torch.randn((5,), generator=g), "batch_isend_irecv from right", True)
    # Around the ring, past a mailbox (2.4 MB > 2 MiB over shm): a group's operations run in
    # call order and such a send waits for its receiver (docs/python.md), so as with blocking
    # calls rank 0 sends first and the others receive first.
    size = 600_000
    got = torch.empty(size)
    send = dist.P2POp(dist.isend, data((size,), torch.float32, 18), right)
    recv = dist.P2POp(dist.irecv, got, left)
    for w in dist.batch_isend_irecv([send, recv] if rank == 0 else [recv, send]):
        w.wait()
    g = torch.Generator().manual_seed(1000 * left + 18)
    same(got, torch.randn((size,), generator=g), f"batch_isend_irecv {size} around the ring", True)

# The coalesced forms.
ts = [data((k + 3,), torch.float32, 18 + k) for k in range(3)]
gs = [t.clone() for t in ts]
dist.all_reduce_coalesced(ts, group=spark)
dist.all_reduce_coalesced(gs, group=gloo)
same(ts, gs, "all_reduce_coalesced", exact=n <= 2)
with dist._coalescing_manager(group=spark, async_ops=True) as cm:
    for t in ts:
        dist.all_reduce(t, group=spark)
cm.wait()
for t in gs:
    dist.all_reduce(t, group=gloo)
same(ts, gs, "all_reduce in _coalescing_manager", exact=n <= 2)

# With a device, _coalescing_manager takes torch's coalesced fast paths (FSDP's).
cpu = torch.device("cpu")
ins = [data((2,), torch.float32, 30 + k) for k in range(2)]
outs = [torch.empty(2 * n) for _ in range(2)]
with dist._coalescing_manager(group=spark, device=cpu, async_ops=True) as cm:
    for o, i in zip(outs, ins):
        dist.all_gather_into_tensor(o, i, group=spark)
cm.wait()
for o, i in zip(outs, ins):
    want = torch.empty(2 * n)
    dist.all_gather_into_tensor(want, i, group=gloo)
    same(o, want, "all_gather_into_tensor_coalesced", True)
ins = [data((2 * n,), torch.float64, 32 + k) for k in range(2)]
outs = [torch.empty(2, dtype=torch.float64) for _ in range(2)]
with dist._coalescing_manager(group=spark, device=cpu, async_ops=True) as cm:
    for o, i in zip(outs, ins):
        dist.reduce_scatter_tensor(o, i, group=spark)
cm.wait()
for o, i in zip(outs, ins):
    same(o, via_all_reduce(i.clone(), (2,)), "reduce_scatter_tensor_coalesced", exact=n <= 2)
ts = [data((3,), torch.float32, 34 + k) for k in range(2)]
gs = [t.clone() for t in ts]
with dist._coalescing_manager(group=spark, device=cpu):
    for t in ts:
        dist.all_reduce(t, group=spark)
for t in gs:
    dist.all_reduce(t, group=gloo)
same(ts, gs, "all_reduce coalesced on a device", exact=n <= 2)

# PREMUL_SUM with a tensor factor; reduce with AVG and PREMUL_SUM (the root's result).
t = data((5,), torch.float32, 36)
s = t * 0.5
dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor(0.5)), group=spark)
dist.all_reduce(s, group=gloo)
same(t, s, "all_reduce PREMUL_SUM tensor factor", exact=False)
for op, scale in ((dist.ReduceOp.AVG, 1.0 / n), (dist._make_nccl_premul_sum(2.0), 2.0)):
    t = data((5,), torch.float64, 37)
    s = t.clone()
    dist.reduce(t, dst=0, op=op, group=spark)
    dist.all_reduce(s, group=gloo)
    if rank == 0:
        same(t, s * scale if op == dist.ReduceOp.AVG else s * 2.0, f"reduce {op}", exact=False)

# The list forms with 0-d tensors and shapes that differ beyond dim 0.
outs = [torch.empty(()) for _ in range(n)]
dist.all_to_all(outs, [torch.tensor(float(100 * rank + p)) for p in range(n)], group=spark)
same(outs, [torch.tensor(float(100 * p + rank)) for p in range(n)], "all_to_all of 0-d tensors", True)
out = torch.empty(2, 3)
dist.reduce_scatter(out, [torch.full((2, 3) if p % 2 else (3, 2), float(rank + p)) for p in range(n)],
                    group=spark)
same(out, torch.full((2, 3), float(sum(r + rank for r in range(n)))), "reduce_scatter of other shapes", True)

# all_to_all_single without split sizes needs dim 0 to divide by the group size.
if n > 1:
    try:
        dist.all_to_all_single(torch.empty(n + 1, 2), torch.zeros(n + 1, 2), group=spark)
        fail("all_to_all_single of an undividable dim 0 did not raise")
    except (RuntimeError, ValueError) as e:
        if "divide" not in str(e):
            fail(f"all_to_all_single undividable: {e}")

dist.barrier()
dist.barrier(group=gloo)

# Refusals name the problem and the fix.
try:
    dist.all_reduce(torch.ones(4, dtype=torch.bool))
    fail("a bool all_reduce did not raise")
except (RuntimeError, ValueError) as e:
    if "backend spark: cannot reduce Bool" not in str(e):
        fail(f"bool all_reduce: {e}")
try:
    dist.all_reduce(torch.ones(4, 4).t())
    fail("a non-contiguous all_reduce did not raise")
except (RuntimeError, ValueError) as e:
    if "contiguous" not in str(e):
        fail(f"non-contiguous all_reduce: {e}")

dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
