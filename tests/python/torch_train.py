"""Rank program: a few SGD steps of a tiny model, gradients all-reduced, under
`sparkrun -n 3 python3 torch_train.py BACKEND OUT`. init_process_group gets no arguments but the
backend: sparkrun provides RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. Writes the final weights
to OUT.<rank>; also all-reduces on a new_group of ranks 0 and 1."""
import sys

import torch
import torch.distributed as dist

import libspark  # noqa: F401  (torch is imported: registers backend "spark")

backend, out = sys.argv[1], sys.argv[2]
dist.init_process_group(backend)
r, n = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(100 + r)
for step in range(5):
    x = torch.randn(8, 16, generator=gen)
    y = torch.randn(8, 4, generator=gen)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= n
    opt.step()
sub = dist.new_group([0, 1])
if r in (0, 1):
    t = torch.full((5,), float(r + 1))
    dist.all_reduce(t, group=sub)
    assert t.tolist() == [3.0] * 5, t
dist.barrier()
torch.save([p.detach().clone() for p in model.parameters()], f"{out}.{r}")
dist.destroy_process_group()
print(f"rank {r} ok", flush=True)
