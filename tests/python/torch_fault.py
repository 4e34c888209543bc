"""Rank program: all_reduce in a loop on backend "spark"; rank 1 stops or kills itself after a
few iterations (argv[1]: stop | kill). The survivors must end the job (fail-stop)."""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import libspark.torch  # noqa: F401

mode = sys.argv[1]
dist.init_process_group("spark")
r = dist.get_rank()
t = torch.ones(256)
for i in range(1000000):
    if r == 1 and i == 20:
        print(f"rank 1: {mode} now at {time.time():.3f}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP if mode == "stop" else signal.SIGKILL)
    dist.all_reduce(t)
    if i == 200000:
        break
print(f"FAIL: rank {r} finished the loop although rank 1 is gone", flush=True)
