"""Rank program (2 ranks, label gpu): comm.allreduce of CUDA tensors takes libspark's device
path; results equal the host path's bit for bit and agree across ranks; chunked sizes (larger
than the device channel), in place and out of place, bf16; a host collective right after a
device one waits for it; the engine adapter on CUDA tensors."""
import sys

import numpy as np
import torch

import libspark
from libspark.engine import SparkCustomAllreduce


def expect(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")


comm = libspark.init()
r, n = comm.rank, comm.size
expect(libspark.built_with_cuda(), "CUDA torch and a GPU, but sparkrun was built without CUDA")
torch.manual_seed(1234 + r)
for dtype in (torch.float32, torch.bfloat16, torch.int32):
    for count in (1, 1000, 3 << 18):  # 3 << 18 f32 = 3 MiB: three launches of the 1 MiB channel
        host = (torch.rand(count) * 100).to(dtype)
        want = host.clone()
        comm.allreduce(want)  # the host path's answer
        dev = host.cuda()
        out = torch.empty_like(dev)
        comm.allreduce(dev, out)  # out of place, on torch's current stream
        comm.allreduce(dev)  # in place
        torch.cuda.current_stream().synchronize()
        expect(torch.equal(out.cpu(), want), f"{dtype} x {count}: device result differs from host's")
        expect(torch.equal(dev.cpu(), want), f"{dtype} x {count}: in-place device result differs")
        # Every rank got the same bits.
        digest = np.frombuffer(out.cpu().view(torch.uint8).numpy().tobytes()[:4096], np.uint8).copy()
        mine = digest.copy()
        comm.broadcast(digest, root=0)
        expect(np.array_equal(digest, mine), f"{dtype} x {count}: ranks differ")
# A host collective right after a device one (no stream sync by the caller): it waits for it.
d = torch.full((4096,), float(r + 1), device="cuda")
comm.allreduce(d)
x = np.ones(4, np.float32)
comm.allreduce(x)
expect(x[0] == n, "host allreduce after a device one")
expect(torch.equal(d.cpu(), torch.full((4096,), float(n * (n + 1) // 2))), "device allreduce value")
# A non-default stream named explicitly.
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    e = torch.full((8,), 2.0, device="cuda")
    comm.allreduce(e)  # torch's current stream is s
s.synchronize()
expect(torch.equal(e.cpu(), torch.full((8,), 2.0 * n)), "allreduce on a side stream")
with SparkCustomAllreduce(comm=comm) as ar:
    t = torch.full((1024,), float(r + 1), device="cuda", dtype=torch.float16)
    expect(ar.should_custom_ar(t), "the adapter refused a CUDA tensor")
    out = ar.custom_all_reduce(t)
    torch.cuda.current_stream().synchronize()
    expect(out.is_cuda and torch.equal(out.cpu(), torch.full((1024,), float(n * (n + 1) // 2),
                                                             dtype=torch.float16)), "adapter result")
comm.check_health()
print(f"rank {r} ok", flush=True)
