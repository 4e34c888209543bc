"""Rank program: the torch.distributed operations on backend "spark" (n ranks), results
checked locally. Run under sparkrun."""
import os
import sys

import torch
import torch.distributed as dist

import libspark.torch as st

dist.init_process_group("spark")
r, n = dist.get_rank(), dist.get_world_size()
for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT"):
    if var not in os.environ:
        sys.exit(f"FAIL: sparkrun did not set {var}")
if int(os.environ["RANK"]) != r or int(os.environ["LOCAL_RANK"]) != r:
    sys.exit("FAIL: RANK/LOCAL_RANK do not match the process group's rank")


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: rank {r}: {what}")


def val(p, k=6, dtype=torch.float32):
    return (torch.arange(k, dtype=torch.float64) + 10 * p + 1).to(dtype)


for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
              torch.int64, torch.uint8):
    allv = [val(p, dtype=dtype) for p in range(n)]
    for op, fold in ((dist.ReduceOp.SUM, lambda a, b: a + b), (dist.ReduceOp.PRODUCT, lambda a, b: a * b),
                     (dist.ReduceOp.MIN, torch.minimum), (dist.ReduceOp.MAX, torch.maximum)):
        if op == dist.ReduceOp.PRODUCT and dtype in (torch.float16, torch.bfloat16, torch.uint8):
            continue  # the products overflow these types
        t = val(r, dtype=dtype)
        dist.all_reduce(t, op=op)
        want = allv[0].clone()
        for v in allv[1:]:
            want = fold(want, v).to(dtype)
        expect(torch.equal(t, want), f"all_reduce {op} {dtype}: {t} != {want}")
if hasattr(dist.ReduceOp, "AVG"):
    t = val(r)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    expect(torch.allclose(t, sum(val(p) for p in range(n)) / n), "all_reduce AVG")
# all_gather, list and into-tensor
outs = [torch.empty(6) for _ in range(n)]
dist.all_gather(outs, val(r))
expect(all(torch.equal(outs[p], val(p)) for p in range(n)), "all_gather")
flat = torch.empty(6 * n)
gather_into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
gather_into(flat, val(r))
expect(torch.equal(flat, torch.cat([val(p) for p in range(n)])), "all_gather_into_tensor")
# reduce_scatter, list and tensor
out = torch.empty(6)
dist.reduce_scatter(out, [val(r) * (q + 1) for q in range(n)])
expect(torch.equal(out, sum(val(p) for p in range(n)) * (r + 1)), "reduce_scatter")
rs_tensor = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
out = torch.empty(6)
rs_tensor(out, torch.cat([val(r) * (q + 1) for q in range(n)]))
expect(torch.equal(out, sum(val(p) for p in range(n)) * (r + 1)), "reduce_scatter_tensor")
# broadcast from every root
for root in range(n):
    t = val(r)
    dist.broadcast(t, src=root)
    expect(torch.equal(t, val(root)), f"broadcast from {root}")
# reduce to root 0 (only the root's tensor changes)
t = val(r)
dist.reduce(t, dst=0)
expect(torch.equal(t, sum(val(p) for p in range(n)) if r == 0 else val(r)), "reduce")
# all_to_all (lists) and all_to_all_single (even and uneven splits)
ins = [val(r, 2) + 100 * q for q in range(n)]
outs = [torch.empty(2) for _ in range(n)]
dist.all_to_all(outs, ins)
expect(all(torch.equal(outs[q], val(q, 2) + 100 * r) for q in range(n)), "all_to_all")
single_in = torch.cat(ins)
single_out = torch.empty(2 * n)
dist.all_to_all_single(single_out, single_in)
expect(torch.equal(single_out, torch.cat([val(q, 2) + 100 * r for q in range(n)])), "all_to_all_single")
in_splits = [q + 1 for q in range(n)]  # rank r sends q+1 rows to rank q
out_splits = [r + 1] * n
src = torch.cat([torch.full((q + 1, 3), float(10 * r + q)) for q in range(n)])
dst = torch.empty(sum(out_splits), 3)
dist.all_to_all_single(dst, src, out_splits, in_splits)
want = torch.cat([torch.full((r + 1, 3), float(10 * q + r)) for q in range(n)])
expect(torch.equal(dst, want), "all_to_all_single with splits")
# send / recv around the ring, async forms too
if n > 1:
    nxt, prv = (r + 1) % n, (r - 1) % n
    got = torch.empty(6)
    if r % 2 == 0:
        dist.send(val(r), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(val(r), nxt)
    expect(torch.equal(got, val(prv)), "send/recv")
work = dist.all_reduce(torch.ones(3), async_op=True)
work.wait()
expect(work.is_completed(), "async Work")
fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
expect(torch.equal(fut.wait()[0], torch.full((3,), float(n))), "Work future")
dist.barrier()
expect(st.failure() is None, "failure() is not None")
try:
    dist.all_reduce(torch.ones(3, dtype=torch.int16))
    expect(False, "int16 accepted")
except RuntimeError as e:
    expect("backend spark: cannot reduce Short tensors" in str(e), f"int16 message: {e}")
# new_group on a subset gets its own communicator
sub = dist.new_group(list(range(n - 1))) if n > 1 else None
if sub is not None and r < n - 1:
    t = torch.ones(4)
    dist.all_reduce(t, group=sub)
    expect(torch.equal(t, torch.full((4,), float(n - 1))), "new_group all_reduce")
dist.barrier()
dist.destroy_process_group()
print(f"rank {r} ok", flush=True)
