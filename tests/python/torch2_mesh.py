"""torch's tensor-parallel API over backend "spark" (torch 2.x): the device mapping
"cpu:spark,cuda:gloo", init_device_mesh, DTensor, and parallelize_module with
ColwiseParallel / RowwiseParallel on an MLP, whose forward and backward must equal the
unsharded model's. Run under `sparkrun -n N`; prints 'rank R ok'."""
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

import libspark.torch

# CUDA tensors would go to the second backend; this machine's torch is a CPU build, so gloo
# stands in for nccl: what is checked is that CPU tensors take "spark".
dist.init_process_group("cpu:spark,cuda:gloo")
rank, n = dist.get_rank(), dist.get_world_size()


def fail(what):
    print(f"FAIL: rank {rank}: {what}", flush=True)
    sys.exit(1)


world = dist.group.WORLD
backend = world._get_backend(torch.device("cpu"))
if type(backend).__name__ != "SparkBackend":
    fail(f"CPU tensors go to {type(backend).__name__}, not backend spark")
if not world.group_name:
    fail("the default group has no name")

mesh = init_device_mesh("cpu", (n,), mesh_dim_names=("tp",))
if dist.get_backend(mesh.get_group()) not in ("spark", "cpu:spark,cuda:gloo"):
    fail(f"the mesh's group is {dist.get_backend(mesh.get_group())}")

# DTensor: shard, redistribute (all_gather), reduce (all_reduce) through the mesh.
full = torch.arange(6.0 * n).reshape(2 * n, 3)
dt = distribute_tensor(full, mesh, [Shard(0)])
if not torch.equal(dt.to_local(), full[2 * rank:2 * rank + 2]):
    fail("distribute_tensor: wrong shard")
if not torch.equal(dt.redistribute(mesh, [Replicate()]).to_local(), full):
    fail("redistribute to Replicate: wrong tensor")
if not torch.equal(dt.sum().full_tensor(), full.sum()):
    fail("DTensor sum: wrong")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 8 * n)
        self.down = nn.Linear(8 * n, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


torch.manual_seed(0)
ref = MLP()
tp = MLP()
tp.load_state_dict(ref.state_dict())
parallelize_module(tp, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
if not isinstance(tp.up.weight, DTensor):
    fail("parallelize_module left the weights plain tensors")

torch.manual_seed(1)
x = torch.randn(4, 16)
want = ref(x)
got = tp(x)
got = got.full_tensor() if isinstance(got, DTensor) else got
if not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
    fail(f"tensor-parallel forward differs from the unsharded model by {(got - want).abs().max().item()}")

want.sum().backward()
got_loss = tp(x)
(got_loss.full_tensor() if isinstance(got_loss, DTensor) else got_loss).sum().backward()
g = tp.up.weight.grad.full_tensor()
if not torch.allclose(g, ref.up.weight.grad, rtol=1e-5, atol=1e-6):
    fail(f"tensor-parallel gradient differs by {(g - ref.up.weight.grad).abs().max().item()}")

# A 2-D mesh needs 4 ranks; with fewer, a sub-mesh of a new_group-made group.
if n >= 2:
    sub = dist.new_group([0, 1])
    if rank < 2:
        t = torch.ones(3) * (rank + 1)
        dist.all_reduce(t, group=sub)
        if not torch.equal(t, torch.full((3,), 3.0)):
            fail("new_group([0, 1]) all_reduce: wrong sum")

dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
