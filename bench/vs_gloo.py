#!/usr/bin/python3
"""torch all_reduce of CPU tensors: backend "spark" vs backend "gloo", measured in the same
processes of the same run (the default group is gloo, a new_group of every rank is spark: same
ranks, same binding, same iterations, the two alternating per size). Plus a numpy allreduce from
Python against the same loop in C++ (bench/allreduce_loop.cpp). Never pass/fail.

    /usr/bin/python3 bench/vs_gloo.py [--build build] [--ranks 2,3] [--max 64M]
        [--json FILE] [--variant quiet|loaded]

--json FILE also writes the target rows as one result set (bench/results.py, bench/README.md)
for bench/report, which makes docs/benchmarks.md: e.g. --json bench/results/vs_gloo-quiet.json.
The rows are added in main() with `rs.row(...)` beside each printed target line; a new target
row is one more call there.

Targets: 16 MiB algbw >= 4x Gloo's; 1 KiB latency <= 0.1x Gloo's; a 1 KiB torch all_reduce on
backend "spark" within 2 us of the same call from C++ (the backend's own cost), numpy from
Python within 5 us. torch >= 2.1 (the backend's floor): on Debian 12 run it inside the Debian 13
root, e.g. scripts/in-debian13 python3 bench/vs_gloo.py --build build/debian13. Prints one table
per rank count and the target rows with met / NOT met."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True  # no bench/__pycache__ in the tree
sys.path.insert(0, HERE)
import results  # noqa: E402  bench/results.py: the result record writer


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1].upper(), 1)
    return int(s[:-1] if mult > 1 else s) * mult


def human(b):
    for unit, m in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= m:
            return f"{b // m} {unit}"
    return f"{b} B"


def iters_for(nbytes):
    # ~0.3 s of gloo per size at 1 GB/s, at least 8 timed calls, at most 400
    return max(8, min(400, int(0.3e9 / max(nbytes, 1) / 4) + 8))


def rank_torch(sizes):
    import torch
    import torch.distributed as dist

    import libspark.torch  # noqa: F401

    dist.init_process_group("gloo")
    spark = dist.new_group(backend="spark")
    groups = {"gloo": None, "spark": spark}
    r = dist.get_rank()
    out = []
    for i, nbytes in enumerate(sizes):
        t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        iters = iters_for(nbytes)
        res = {}
        order = ("gloo", "spark") if i % 2 == 0 else ("spark", "gloo")
        for name in order:
            g = groups[name]
            # libspark times its two one-node paths in a size's first 42 calls (two rounds,
            # coll/copy_tuner.hpp): warm both backends past them, alike.
            for _ in range(45):
                dist.all_reduce(t, group=g)
            dist.barrier()
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                dist.all_reduce(t, group=g)
                times.append(time.perf_counter() - t0)
            res[name] = statistics.median(times)
        out.append({"bytes": nbytes, "iters": iters, **res})
    if r == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def median_call_us(call, iters, warmup):
    """Median time of one call() in microseconds, after `warmup` untimed calls."""
    for _ in range(warmup):
        call()
    times = []
    clock = time.perf_counter_ns
    for _ in range(iters):
        t0 = clock()
        call()
        times.append((clock() - t0) / 1000)
    return statistics.median(times)


def rank_numpy(nbytes, iters):
    import numpy as np

    import libspark

    comm = libspark.init()
    x = np.ones(nbytes // 4, np.float32)
    us = median_call_us(lambda: comm.allreduce(x), iters, iters // 10 + 10)
    if comm.rank == 0:
        print(f"python median_us {us:.2f}", flush=True)


def rank_torch_loop(nbytes, iters):
    """The same 1 KiB loop as allreduce_loop.cpp, through torch.distributed on backend spark."""
    import torch
    import torch.distributed as dist

    import libspark.torch  # noqa: F401

    dist.init_process_group("spark")
    t = torch.ones(nbytes // 4, dtype=torch.float32)
    us = median_call_us(lambda: dist.all_reduce(t), iters, iters // 10 + 10)
    if dist.get_rank() == 0:
        print(f"torch median_us {us:.2f}", flush=True)
    dist.destroy_process_group()


def one_rank_floor(iters):
    """torch's own cost of a call: all_reduce on a group of one rank (libspark's part is a
    no-op there), through dist.all_reduce and through the ProcessGroup object directly."""
    import torch
    import torch.distributed as dist

    import libspark.torch  # noqa: F401

    dist.init_process_group("spark", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.ones(256)
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    res = {name: median_call_us(call, iters, iters // 10 + 100) for name, call in (
        ("dist.all_reduce", lambda: dist.all_reduce(t)),
        ("ProcessGroup.allreduce().wait()", lambda: pg.allreduce([t], opts).wait()))}
    print("FLOOR " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})),
                       timeout=900)
    if p.returncode != 0:
        sys.exit(f"vs_gloo: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="2,3")
    ap.add_argument("--min", default="1K")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--loop-iters", type=int, default=5000, help="calls in the Python vs C++ loop")
    ap.add_argument("--pairs", type=int, default=3, help="Python/C++ job pairs (alternating)")
    ap.add_argument("--json", metavar="FILE", help="also write the target rows for bench/report")
    ap.add_argument("--variant", default="quiet", choices=results.VARIANTS,
                    help="what else ran on the machine (loaded: beside CPU-bound load)")
    ap.add_argument("--rank-torch", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank-numpy", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank-torch-loop", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one-rank-floor", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_torch:
        return rank_torch([int(s) for s in a.sizes.split(",")])
    if a.rank_numpy:
        return rank_numpy(1024, a.loop_iters)
    if a.rank_torch_loop:
        return rank_torch_loop(1024, a.loop_iters)
    if a.one_rank_floor:
        return one_rank_floor(a.loop_iters)

    build = os.path.abspath(a.build)
    sparkrun = os.path.join(build, "launcher", "sparkrun")
    env = {"PYTHONPATH": os.path.join(build, "python")}
    sizes, s = [], parse_size(a.min)
    while s <= parse_size(a.max):
        sizes.append(s)
        s *= 4
    load = os.getloadavg()[0]
    print(f"# vs_gloo: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cpus, "
          f"load {load:.1f}; median of each size's timed calls; algbw = bytes / time")
    summary = {}
    for n in [int(x) for x in a.ranks.split(",")]:
        outp = run([sparkrun, "-n", str(n), sys.executable, __file__, "--rank-torch",
                    "--sizes", ",".join(map(str, sizes))], env)
        rows = json.loads(outp.split("RESULT ", 1)[1].splitlines()[0])
        print(f"\n## {n} ranks\n| size | iters | gloo us | spark us | gloo GB/s | spark GB/s | spark/gloo time |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for row in rows:
            b, g, sp = row["bytes"], row["gloo"], row["spark"]
            print(f"| {human(b)} | {row['iters']} | {g * 1e6:.1f} | {sp * 1e6:.1f} | {b / g / 1e9:.2f} | "
                  f"{b / sp / 1e9:.2f} | {sp / g:.3f} |")
            summary[(n, b)] = (g, sp)
    # numpy from Python vs the same loop in C++, alternating jobs
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "allreduce_loop")
        subprocess.run(["c++", "-std=c++20", "-O2", "-o", exe, os.path.join(HERE, "allreduce_loop.cpp"),
                        "-I", os.path.join(ROOT, "libspark", "include"), "-L", os.path.join(build, "libspark"),
                        "-lspark", "-Wl,-rpath," + os.path.join(build, "libspark")], check=True)
        py, cpp, tl = [], [], []
        for _ in range(a.pairs):
            cpp.append(float(run([sparkrun, "-n", "2", exe, "1024", str(a.loop_iters)]).split()[-1]))
            py.append(float(run([sparkrun, "-n", "2", sys.executable, __file__, "--rank-numpy",
                                 "--loop-iters", str(a.loop_iters)], env).split()[-1]))
            tl.append(float(run([sparkrun, "-n", "2", sys.executable, __file__, "--rank-torch-loop",
                                 "--loop-iters", str(a.loop_iters)], env).split()[-1]))
    print("\n## numpy and torch from Python vs C++ (2 ranks, 1 KiB f32 allreduce in place, median per job)")
    print(f"C++ {', '.join(f'{x:.2f}' for x in cpp)} us; numpy {', '.join(f'{x:.2f}' for x in py)} us; "
          f"torch {', '.join(f'{x:.2f}' for x in tl)} us")
    diff = statistics.median(py) - statistics.median(cpp)
    tdiff = statistics.median(tl) - statistics.median(cpp)
    floor = json.loads(run([sys.executable, __file__, "--one-rank-floor", "--loop-iters",
                            str(a.loop_iters)], env).split("FLOOR ", 1)[1].splitlines()[0])
    floor_text = (f"torch's own floor, a group of one rank: dist.all_reduce "
                  f"{floor['dist.all_reduce']:.2f} us, ProcessGroup.allreduce().wait() "
                  f"{floor['ProcessGroup.allreduce().wait()']:.2f} us")
    print(f"{floor_text}; torch per job: {', '.join(f'{x:.2f}' for x in tl)} us")
    print("\n## targets")
    rs = results.ResultSet("vs_gloo", a.variant, "bench/vs_gloo.py " + " ".join(sys.argv[1:]),
                           load=f"{load:.1f} -> {os.getloadavg()[0]:.1f}") if a.json else None

    def verdict(ok):
        return "met" if ok else "NOT met"

    for n in [int(x) for x in a.ranks.split(",")]:
        if (n, 16 << 20) in summary:
            g, sp = summary[(n, 16 << 20)]
            print(f"- {n} ranks, 16 MiB algbw: spark {16 * 2**20 / sp / 1e9:.2f} GB/s = {g / sp:.2f}x gloo "
                  f"(target >= 4x): {verdict(g / sp >= 4)}")
            if rs:
                rs.row(f"{n} ranks, 16 MiB algbw", "GB/s", 16 * 2**20 / sp / 1e9, ">=", "Gloo",
                       16 * 2**20 / g / 1e9, ratio=4)
        if (n, 1024) in summary:
            g, sp = summary[(n, 1024)]
            print(f"- {n} ranks, 1 KiB latency: spark {sp * 1e6:.1f} us = {sp / g:.3f}x gloo's {g * 1e6:.0f} us "
                  f"(target <= 0.1x): {verdict(sp / g <= 0.1)}")
            if rs:
                rs.row(f"{n} ranks, 1 KiB latency", "us", sp * 1e6, "<=", "Gloo", g * 1e6, ratio=0.1)
    print(f"- numpy allreduce from Python: {diff:+.2f} us vs C++ (median of {a.pairs} job medians; "
          f"target within 5 us): {verdict(abs(diff) <= 5)}")
    print(f"- torch all_reduce on backend spark: {tdiff:+.2f} us vs C++ (median of {a.pairs} job "
          f"medians; target within 2 us): {verdict(abs(tdiff) <= 2)}")
    if rs:
        rs.row("numpy 1 KiB allreduce from Python, time over the same C++ loop", "us", abs(diff), "<=", value=5)
        rs.row("torch 1 KiB all_reduce (backend spark), time over the same C++ loop", "us", abs(tdiff),
               "<=", value=2, note=floor_text)
        rs.write(a.json)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
