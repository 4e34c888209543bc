"""Future callbacks that issue collectives on the same group (torch 2.x, backend "spark"):
DDP with torch's PowerSGD hook (its then() callbacks all-reduce and wait), and a synchronous
all_reduce inside a then() callback. Run under `sparkrun -n N`; prints 'rank R ok'. A hang
ends in the job's timeout (the runner's), a wrong result in FAIL."""
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

import libspark.torch  # noqa: F401

dist.init_process_group("spark")
rank, n = dist.get_rank(), dist.get_world_size()


def fail(what):
    print(f"FAIL: rank {rank}: {what}", flush=True)
    sys.exit(1)


t, t2 = torch.ones(4), torch.ones(4)


def callback(fut):
    dist.all_reduce(t2)  # synchronous, inside the callback
    return t2


fut = dist.all_reduce(t, async_op=True).get_future().then(callback)
if not torch.equal(fut.wait(), torch.full((4,), float(n))):
    fail("the callback's all_reduce gave a wrong result")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
ddp = torch.nn.parallel.DistributedDataParallel(model)
state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
ddp.register_comm_hook(state, powerSGD.powerSGD_hook)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
g = torch.Generator().manual_seed(rank)
for step in range(4):
    loss = ddp(torch.randn(16, 64, generator=g)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
# Every rank applied the same (compressed) gradients: the weights agree.
for p in ddp.parameters():
    ref = p.detach().clone()
    dist.broadcast(ref, src=0)
    if not torch.equal(ref, p.detach()):
        fail("PowerSGD DDP: the weights differ between ranks")
dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
