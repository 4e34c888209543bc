"""Rank program (2 ranks): the vLLM-shaped adapter with torch tensors."""
import sys

import torch

import libspark
from libspark.engine import SparkCustomAllreduce


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


with SparkCustomAllreduce(max_size=4096) as ar:
    r, n = ar.rank, ar.world_size
    t = torch.full((16,), float(r + 1))
    expect(ar.should_custom_ar(t), "should_custom_ar refused a small f32 tensor")
    out = ar.custom_all_reduce(t)
    expect(torch.equal(out, torch.full((16,), float(n * (n + 1) // 2))), f"custom_all_reduce {out}")
    expect(torch.equal(t, torch.full((16,), float(r + 1))), "custom_all_reduce changed its input")
    big = torch.ones(2048)  # 8 KiB > max_size
    expect(not ar.should_custom_ar(big) and ar.custom_all_reduce(big) is None, "max_size not applied")
    expect(not ar.should_custom_ar(torch.ones(4, 4).t()), "non-contiguous accepted")
    expect(not ar.should_custom_ar(torch.ones(4, dtype=torch.int16)), "int16 accepted")
    expect(ar.max_size == 4096, "max_size property")
    b = torch.full((3,), 2.0, dtype=torch.bfloat16)
    ar.all_reduce(b)
    expect(torch.equal(b, torch.full((3,), 2.0 * n, dtype=torch.bfloat16)), "all_reduce bf16")
    x = torch.full((2, 3), float(r))
    g0 = ar.all_gather(x, dim=0)
    expect(g0.shape == (2 * n, 3) and torch.equal(g0[2 * (n - 1):], torch.full((2, 3), float(n - 1))), f"all_gather dim 0 {g0}")
    g1 = ar.all_gather(x, dim=1)
    expect(g1.shape == (2, 3 * n) and torch.equal(g1[:, 3:6], torch.full((2, 3), 1.0)), f"all_gather dim 1 {g1}")
    with ar.capture():
        pass
    ar.check_health()
    expect(ar.failure() is None, "failure() not None")
expect(not ar.should_custom_ar(t), "should_custom_ar true after close()")
print(f"rank {r} ok", flush=True)
