"""async_op, futures, timeouts and failures of backend "spark" (torch 2.x). Run under
`sparkrun -n 2 python3 torch2_async.py MODE`:
  overlap   an async all_reduce returns at once while its peer is late, wait() and the future
            finish it; async ops finish in call order; torch's timeout= becomes the group's
            (checked against EXPECT_TIMEOUT_MS for the default group)
  failure   (SPARK_ON_FAILURE=raise) rank 1 never joins: rank 0's wait() and future raise the
            one-line record naming rank 1
Prints 'rank R ok'."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import libspark.torch

mode = sys.argv[1]
dist.init_process_group("spark")
rank, n = dist.get_rank(), dist.get_world_size()


def fail(what):
    print(f"FAIL: rank {rank}: {what}", flush=True)
    sys.exit(1)


if mode == "overlap":
    want = int(os.environ["EXPECT_TIMEOUT_MS"])
    if libspark.torch.timeout_ms() != want:
        fail(f"default group: timeout {libspark.torch.timeout_ms()} ms, expected {want}")
    sub = dist.new_group(timeout=datetime.timedelta(seconds=3))
    want_sub = int(os.environ.get("SPARKNET_ROCE_TIMEOUT_MS") or 3000)
    if libspark.torch.timeout_ms(sub) != want_sub:
        fail(f"new_group(timeout=3 s): timeout {libspark.torch.timeout_ms(sub)} ms, expected {want_sub}")

    x = torch.full((1 << 16,), float(rank + 1))
    if rank == 1:
        time.sleep(1.0)  # rank 0's call must not wait for this
    t0 = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    returned = time.monotonic() - t0
    doubled = work.get_future().then(lambda f: f.value()[0] * 2)
    if rank == 0:
        if returned > 0.3:
            fail(f"all_reduce(async_op=True) took {returned:.3f} s to return (its peer was 1 s late)")
        if work.is_completed():
            fail("the work completed although its peer had not called yet")
        busy = 0
        while not work.is_completed() and time.monotonic() - t0 < 10:
            busy += 1  # the caller's own work goes on meanwhile
            time.sleep(0.01)
        if busy < 20:
            fail(f"only {busy} rounds of the caller's work ran while the all_reduce waited")
    work.wait()
    if not torch.equal(x, torch.full((1 << 16,), float(n * (n + 1) // 2))):
        fail("async all_reduce: wrong result")
    if not torch.equal(doubled.wait(), x * 2):
        fail("future.then: wrong value")

    # Many in flight: they run in call order; waiting on the last finishes all.
    ts = [torch.full((1000,), float(rank + k)) for k in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    works[-1].wait()
    if not all(w.is_completed() for w in works):
        fail("waiting on the last async op left an earlier one unfinished")
    for k, t in enumerate(ts):
        if not torch.equal(t, torch.full((1000,), float(sum(r + k for r in range(n))))):
            fail(f"async op {k}: wrong result")
    dist.barrier()
    dist.destroy_process_group()
elif mode == "failure":
    libspark.torch.set_timeout_ms(500)
    if rank == 1:
        time.sleep(3.0)  # never joins; leaves after rank 0 has failed
        print(f"rank {rank} ok", flush=True)
        os._exit(0)
    work = dist.all_reduce(torch.ones(8), async_op=True)
    fut = work.get_future()
    try:
        work.wait()
        fail("wait() returned although rank 1 never joined")
    except Exception as e:  # noqa: BLE001 - torch surfaces it as RuntimeError or our CommFailure
        print(f"rank 0: wait() raised: {e}", flush=True)
        if "no data from rank 1" not in str(e) or "timeout 500 ms" not in str(e):
            fail(f"wait() raised without the record naming rank 1: {e}")
    try:
        fut.wait()
        fail("the future completed although rank 1 never joined")
    except Exception as e:  # noqa: BLE001
        if "no data from rank 1" not in str(e):
            fail(f"the future's error is not the record: {e}")
    if libspark.torch.failure() is None or "rank 1" not in libspark.torch.failure():
        fail(f"libspark.torch.failure() = {libspark.torch.failure()!r}")
print(f"rank {rank} ok", flush=True)
