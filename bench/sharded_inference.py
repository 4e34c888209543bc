#!/usr/bin/python3
"""Batch inference timings of examples/sharded_inference through sparkrun (never part of the
test run; the page is docs/examples/sharded_inference.md, the figures docs/benchmarks.md).

    /usr/bin/python3 bench/sharded_inference.py [--build DIR] [--reps N] [--json FILE]
                                                [--variant quiet|loaded] [--torch]

1. Throughput: tokens/s (prompt + generated) at 1, 2 and 3 ranks, the same model and
   requests; the 2- and 3-rank rows are ratios against the 1-rank run. With --torch also the
   PyTorch twin (examples/torch_sharded_inference, this interpreter, the build's libspark
   package on PYTHONPATH) at 1, 2 and 3 ranks, against the C++ example at as many ranks.
2. What a resume costs: 3 ranks under --max-restarts 1 --restart-backoff 0; one rank gets
   kill -9 once the job has written results. The time from the kill to the first new result,
   split into detect (kill -> sparkrun's report), restart (report -> the new ranks start
   libspark: the remainder), wire-up (spark::init, from the example's summary), model load
   (loading, the output's check and digests, the barrier: the summary's "load") and the
   first batch.
3. Durability: tokens/s with --fsync batch (fdatasync after every batch) against --fsync
   none, 1 rank, --batch 8 and --batch 1 (the worst case).
Medians of N repetitions; stderr lines are timestamped as they arrive from sparkrun.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import results  # noqa: E402

SUMMARY = re.compile(r"^summary: (\d+) requests on (\d+) ranks.* in ([0-9.]+) s(?: \(init ([0-9.]+) s, "
                     r"load ([0-9.]+) s\))?: .* ([0-9]+) tokens/s with prompts")
TWIN = os.path.join(os.path.dirname(HERE), "examples", "torch_sharded_inference", "main.py")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def summary(err):
    for line in err.splitlines():
        m = SUMMARY.match(line)
        if m:
            return {"requests": int(m[1]), "seconds": float(m[3]), "init": float(m[4] or 0),
                    "load": float(m[5] or 0), "tokens_s": float(m[6])}
    raise RuntimeError("no summary line in:\n" + err)


def tokens_per_s(sparkrun, prog, d, ranks, extra):
    """prog: the C++ example, or [python, main.py] for the twin."""
    out = os.path.join(d, "out.jsonl")
    for p in (out, out + ".job"):
        if os.path.exists(p):
            os.remove(p)
    prog = prog if isinstance(prog, list) else [prog]
    r = run([sparkrun, "-n", str(ranks)] + prog + ["--model", f"{d}/m.safetensors", "--input", f"{d}/req.jsonl",
                                                   "--output", out, "--quiet"] + extra)
    return summary(r.stderr)["tokens_s"]


def resume_once(sparkrun, prog, d):
    """One kill -9 and restart; returns the phases in ms."""
    out = os.path.join(d, "res.jsonl")
    for p in (out, out + ".job"):
        if os.path.exists(p):
            os.remove(p)
    marker = d
    job = subprocess.Popen([sparkrun, "-n", "3", "--max-restarts", "1", "--restart-backoff", "0", prog, "--model",
                            f"{d}/m.safetensors", "--input", f"{d}/req.jsonl", "--output", out, "--batch", "4",
                            "--progress-every", "0"], stderr=subprocess.PIPE, text=True, bufsize=1)
    while not (os.path.exists(out) and os.path.getsize(out) > 0):
        time.sleep(0.005)
    ranks = [int(p) for p in run(["pgrep", "-f", "--", marker]).stdout.split()
             if open(f"/proc/{p}/comm").read().strip() == os.path.basename(prog)[:15]]
    t_kill = time.monotonic()
    os.kill(ranks[1], signal.SIGKILL)
    t_report = t_first = None
    resumed = False
    lines = []
    for line in job.stderr:
        now = time.monotonic()
        lines.append(line)
        if t_report is None and " was killed by signal 9" in line:
            t_report = now
        if "resuming '" in line:
            resumed = True
        # After the resume: the first progress line is the start count, the second the first batch.
        if resumed and t_first is None and line.startswith("progress: ") and " 0.0 requests/s" not in line:
            t_first = now
    job.wait()
    err = "".join(lines)
    if job.returncode != 0 or t_report is None or t_first is None:
        raise RuntimeError(f"resume run failed (exit {job.returncode}):\n{err}")
    s = summary(err)  # the second attempt's
    total = (t_first - t_kill) * 1e3
    detect = (t_report - t_kill) * 1e3
    first_batch = s["seconds"] / max(s["requests"], 1) * 4 * 1e3  # one batch of 4 at its mean pace
    init, load = s["init"] * 1e3, s["load"] * 1e3
    return {"total": total, "detect": detect, "restart": total - detect - init - load - first_batch, "init": init,
            "load": load, "first batch": first_batch}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--variant", default="quiet", choices=results.VARIANTS)
    ap.add_argument("--torch", action="store_true", help="also the PyTorch twin")
    a = ap.parse_args()
    sparkrun = os.path.join(a.build, "launcher", "sparkrun")
    prog = os.path.join(a.build, "examples", "sharded_inference")
    for p in (sparkrun, prog):
        if not os.access(p, os.X_OK):
            sys.exit(f"build sparkrun and sharded_inference first ({p} is missing)")
    load0 = os.getloadavg()[0]
    rs = results.ResultSet("sharded_inference", a.variant, "bench/sharded_inference.py " + " ".join(sys.argv[1:]),
                           note="Model: 2 layers, dim 192, 6 heads, ffn 768, vocab 512; 48 requests of 16-32 "
                           "prompt tokens, 16 new tokens (--reduce exact). Medians.")
    with tempfile.TemporaryDirectory(prefix="bench_si_") as d:
        run([prog, "--make-model", f"{d}/m.safetensors", "--layers", "2", "--dim", "192", "--heads", "6", "--ffn",
             "768", "--vocab", "512"])
        run([prog, "--make-requests", f"{d}/req.jsonl", "--count", "48", "--prompt-len", "32", "--vocab", "512"])
        tps = {n: statistics.median(tokens_per_s(sparkrun, prog, d, n, []) for _ in range(a.reps)) for n in (1, 2, 3)}
        for n in (1, 2, 3):
            print(f"tokens/s, {n} ranks: {tps[n]:.0f}")
        for n in (2, 3):
            rs.row(f"tokens/s, {n} ranks (against 1 rank)", "tok/s", tps[n], ">=", peer_name="1 rank", peer=tps[1],
                   ratio=1.0)
        if a.torch:
            for n in (1, 2, 3):
                twin = statistics.median(tokens_per_s(sparkrun, [sys.executable, TWIN], d, n, [])
                                         for _ in range(a.reps))
                print(f"torch twin tokens/s, {n} ranks: {twin:.0f}")
                rs.row(f"torch twin tokens/s, {n} ranks (against the C++ example)", "tok/s", twin, ">=",
                       peer_name=f"C++, {n} ranks", peer=tps[n], ratio=0.5)
        phases = [resume_once(sparkrun, prog, d) for _ in range(a.reps)]
        med = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
        print("resume, ms (median): " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
        rs.row("kill -9 of a rank -> first new result, 3 ranks", "ms", round(med["total"], 1), "<=", value=3000,
               note="; ".join(f"{k} {med[k]:.0f} ms" for k in ("detect", "restart", "init", "load", "first batch")))
        for k, name in (("detect", "detect (kill -> sparkrun's report)"),
                        ("restart", "restart (report -> new ranks in spark::init)"),
                        ("init", "wire-up (spark::init)"), ("load", "model load, output check, barrier")):
            rs.row(f"resume: {name}", "ms", round(med[k], 1), "<=", value=1000)
        for batch in (8, 1):
            on = statistics.median(tokens_per_s(sparkrun, prog, d, 1, ["--batch", str(batch)]) for _ in range(a.reps))
            off = statistics.median(tokens_per_s(sparkrun, prog, d, 1, ["--batch", str(batch), "--fsync", "none"])
                                    for _ in range(a.reps))
            print(f"--batch {batch}: tokens/s with fsync {on:.0f}, without {off:.0f}")
            rs.row(f"tokens/s with --fsync batch, --batch {batch}, 1 rank", "tok/s", on, ">=",
                   peer_name="--fsync none", peer=off, ratio=0.95 if batch == 8 else 0.8)
    rs.data["load"] = f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"
    if a.json:
        rs.write(a.json)


if __name__ == "__main__":
    main()
