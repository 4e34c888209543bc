#!/usr/bin/python3
"""A DDP training step of a ~10 M-parameter MLP on CPU tensors: backend "spark" against "gloo"
in the same processes of the same run (same model, same batches, one torch thread per rank,
the configurations alternating in rounds), and spark's step with DDP's overlap (its gradient
buckets all-reduced while the backward pass goes on: async_op) against the same step with
every bucket all-reduced synchronously inside the backward pass. Never pass/fail.

    python3 bench/torch_ddp.py [--build build] [--ranks 2] [--steps 20] [--rounds 3]
        [--batch 2,16] [--json FILE] [--variant quiet|loaded]

Each batch size is one job: at batch 2 the step is mostly communication, at 16 mostly this
machine's single-thread matrix work.

Targets: a step on spark at most 0.7x gloo's time; overlap no slower than the synchronous
path. torch >= 2.1: on Debian 12 run it inside the Debian 13 root (scripts/in-debian13)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
import results  # noqa: E402


def rank_main(steps, rounds, batch):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import libspark.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("spark")
    gloo = dist.new_group(backend="gloo")
    n = dist.get_world_size()

    def model():
        torch.manual_seed(0)  # 1024*4096*2 + 1024*1024 weights: 9.4 M parameters
        return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024))

    def sync_hook(state, bucket):
        t = bucket.buffer()
        dist.all_reduce(t)  # blocks inside the backward pass: no overlap
        t.div_(n)
        fut = torch.futures.Future()
        fut.set_result(t)
        return fut

    configs = {"gloo": DDP(model(), process_group=gloo), "spark": DDP(model()),
               "spark_sync": DDP(model())}
    configs["spark_sync"].register_comm_hook(None, sync_hook)
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in configs.items()}
    g = torch.Generator().manual_seed(dist.get_rank())
    x, y = torch.randn(batch, 1024, generator=g), torch.randn(batch, 1024, generator=g)

    def step(name):
        m, o = configs[name], opts[name]
        o.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        o.step()

    times = {k: [] for k in configs}
    for r in range(rounds):
        order = list(configs) if r % 2 == 0 else list(reversed(configs))
        for name in order:
            for _ in range(3):  # warm-up: buckets built, pages touched
                step(name)
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                step(name)
            dist.barrier()
            times[name].append((time.perf_counter() - t0) / steps)
    if dist.get_rank() == 0:
        params = sum(p.numel() for p in configs["spark"].parameters())
        print("RESULT " + json.dumps({"params": params, "times": times, "torch": torch.__version__}),
              flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", default="2,16", help="batch sizes, comma-separated")
    ap.add_argument("--json", metavar="FILE", help="also write the target rows for bench/report")
    ap.add_argument("--variant", default="quiet", choices=results.VARIANTS)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        return rank_main(a.steps, a.rounds, int(a.batch))
    build = os.path.abspath(a.build)
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), GLOO_SOCKET_IFNAME="lo")
    load = os.getloadavg()[0]
    rs = None
    for batch in [int(b) for b in a.batch.split(",")]:
        cmd = [os.path.join(build, "launcher", "sparkrun"), "-n", str(a.ranks), sys.executable,
               __file__, "--rank", "--steps", str(a.steps), "--rounds", str(a.rounds), "--batch",
               str(batch)]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if p.returncode != 0:
            sys.exit(f"torch_ddp: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        res = json.loads(p.stdout.split("RESULT ", 1)[1].splitlines()[0])
        med = {k: statistics.median(v) for k, v in res["times"].items()}
        what = f"{res['params'] / 1e6:.1f} M-parameter MLP, {a.ranks} ranks, batch {batch}"
        print(f"# torch_ddp: {what}, {a.steps} steps x {a.rounds} rounds; load {load:.1f}")
        for k, v in res["times"].items():
            print(f"- {k}: step {med[k] * 1e3:.1f} ms (rounds: {', '.join(f'{t * 1e3:.1f}' for t in v)})")
        ratio, overlap = med["spark"] / med["gloo"], med["spark"] / med["spark_sync"]
        print(f"- spark / gloo: {ratio:.2f}x (target <= 0.7x): {'met' if ratio <= 0.7 else 'NOT met'}")
        print(f"- spark with overlap / synchronous buckets: {overlap:.2f}x (target <= 1.0x): "
              f"{'met' if overlap <= 1.0 else 'NOT met'}")
        if a.json:
            rs = rs or results.ResultSet(
                "torch_ddp", a.variant, "bench/torch_ddp.py " + " ".join(sys.argv[1:]),
                load=f"{load:.1f} -> {os.getloadavg()[0]:.1f}",
                note=f"torch {res['torch']}, one torch thread per rank")
            rs.row(f"DDP step, {what}", "ms", med["spark"] * 1e3, "<=", "Gloo", med["gloo"] * 1e3,
                   ratio=0.7)
            rs.row(f"DDP step with overlap against synchronous buckets, batch {batch}", "ms",
                   med["spark"] * 1e3, "<=", "spark synchronous", med["spark_sync"] * 1e3, ratio=1.0)
    if rs:
        rs.write(a.json)


if __name__ == "__main__":
    main()
