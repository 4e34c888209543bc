#!/usr/bin/python3
"""What the flight recorder costs on the hot path (docs/observability.md): a 1 KiB f32 shm
allreduce between 2 ranks, with the recorder (SPARK_FLIGHT_RECORDER=64, the default; with its
per-lane counters: bytes per send, blocked and busy time) and
without it (0), in paired jobs of the same loop (bench/flight_recorder_loop.cpp: ITERS calls
timed in batches of 100, the median batch). The order alternates per pair (on-off, off-on, ...) so that a drift
of the machine's load falls on both sides. Target: the recorder's time within 2 % of the
time without it.

    bench/flight_recorder.py [--build build] [--pairs 10] [--iters 50000]
                             [--json FILE --variant quiet|loaded]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import results  # noqa: E402


def us_per_call(sparkrun, exe, iters, ops):
    env = dict(os.environ, SPARK_TRANSPORT="shm", SPARK_FLIGHT_RECORDER=str(ops))
    out = subprocess.run([sparkrun, "-n", "2", exe, "1024", str(iters)], capture_output=True,
                         text=True, env=env, check=True, timeout=300).stdout
    return float(out.split("ns_per_call")[1].split()[0]) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--iters", type=int, default=200000)
    ap.add_argument("--json")
    ap.add_argument("--variant", default="quiet", choices=results.VARIANTS)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    sparkrun = os.path.join(build, "launcher", "sparkrun")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "flight_recorder_loop")
        subprocess.run(["c++", "-std=c++20", "-O2", "-o", exe, os.path.join(HERE, "flight_recorder_loop.cpp"),
                        "-I", os.path.join(ROOT, "libspark", "include"), "-L", os.path.join(build, "libspark"),
                        "-lspark", "-Wl,-rpath," + os.path.join(build, "libspark")], check=True)
        on, off = [], []
        for p in range(a.pairs):
            order = (64, 0) if p % 2 == 0 else (0, 64)
            got = {ops: us_per_call(sparkrun, exe, a.iters, ops) for ops in order}
            on.append(got[64])
            off.append(got[0])
            print(f"pair {p + 1}: recorder {got[64]:.4f} us, without {got[0]:.4f} us, "
                  f"ratio {got[64] / got[0]:.3f}", flush=True)
    ratios = sorted(x / y for x, y in zip(on, off))
    ratio = statistics.median(on) / statistics.median(off)
    met = ratio <= 1.02
    print(f"median: recorder {statistics.median(on):.4f} us, without {statistics.median(off):.4f} us: "
          f"{ratio:.3f}x (pair ratios {ratios[0]:.3f}-{ratios[-1]:.3f}); target <= 1.02: "
          f"{'met' if met else 'NOT met'}")
    if a.json:
        r = results.ResultSet("flight_recorder", a.variant,
                              command="bench/flight_recorder.py " + " ".join(sys.argv[1:]),
                              note=f"{a.pairs} pairs of jobs, each {a.iters} calls timed in batches "
                                   f"of 100 (median batch); the spread is that of the pair ratios")
        r.row("2 ranks shm, 1 KiB allreduce, recorder (64 ops, per-lane counters) vs none", "us",
              round(statistics.median(on), 4), "<=", peer_name="SPARK_FLIGHT_RECORDER=0",
              peer=round(statistics.median(off), 4), ratio=1.02,
              spread=f"{ratios[0]:.3f}-{ratios[-1]:.3f}")
        r.write(a.json)


if __name__ == "__main__":
    main()
