#!/usr/bin/python3
"""Writes one result set of a bench as JSON, in the one format that bench/report reads to make
docs/benchmarks.md. Python 3 standard library only. The format is described in bench/README.md
("Result records"); in short:

    {"bench": "vs_mpi", "command": "bench/vs_mpi.sh -r 5", "variant": "quiet" | "loaded",
     "date": "2026-12-06T02:28Z", "commit": "c7e9045",
     "machine": {"cpu": "AMD EPYC", "cores": 2, "kernel": "6.1.0-28-amd64", "arch": "x86_64"},
     "note": "optional text", "load": "optional, e.g. 1.7 -> 3.5",
     "rows": [{"what": "2 ranks shm, 1 KiB", "unit": "us",
               "ours": 0.75, "peer_name": "Open MPI 4.1", "peer": 1.30,
               "target": {"op": "<=", "ratio": 0.5}, "spread": "0.48-0.60"}]}

A row's ratio is ours / peer (give "ratio" instead when only the ratio is known). A target is
{"op", "ratio"} (compared with the ratio) or {"op", "value"} (compared with "ours", for rows
without a peer); op is one of <=, <, >=, >; null for a point of a curve that has no target of
its own (shown without a verdict).

From Python:  import results; r = results.ResultSet("vs_gloo", variant); r.row(...); r.write(path)
From a shell: print one JSON row per line and pipe them into
    python3 bench/results.py write OUT --bench NAME --variant quiet|loaded --command "..." [--note TEXT]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("quiet", "loaded")
OPS = ("<=", "<", ">=", ">")


def machine():
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "Model name", "Hardware"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(), "arch": platform.machine()}


def commit():
    try:
        out = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def check_row(row):
    """Raises ValueError naming what is wrong with one row."""
    for key in ("what", "unit"):
        if key not in row:
            raise ValueError(f"row {row.get('what', '?')!r}: no {key!r}")
    if "target" not in row:
        raise ValueError(f"row {row['what']!r}: no 'target' (null for a point of a curve without a target)")
    t = row["target"]
    if t is None:
        return
    if t.get("op") not in OPS or ("ratio" in t) == ("value" in t):
        raise ValueError(f"row {row['what']!r}: target must be {{op: one of {OPS}, ratio or value}}, got {t}")
    if "ratio" in t and "ratio" not in row and not (row.get("ours") is not None and row.get("peer")):
        raise ValueError(f"row {row['what']!r}: a ratio target needs ours and peer, or ratio")
    if "value" in t and row.get("ours") is None:
        raise ValueError(f"row {row['what']!r}: a value target needs ours")


class ResultSet:
    def __init__(self, bench, variant, command=None, note=None, load=None):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, not {variant!r}")
        self.data = {"bench": bench, "command": command or " ".join(sys.argv), "variant": variant,
                     "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
                     "commit": commit(), "machine": machine(), "rows": []}
        if note:
            self.data["note"] = note
        if load:
            self.data["load"] = load

    def row(self, what, unit, ours, target_op, peer_name=None, peer=None, ratio=None, value=None,
            spread=None, note=None):
        """Target: ratio=X (compared with ours/peer) or value=X (compared with ours); target_op
        None: a point of a curve, shown without a verdict (ratio=X then gives its ratio)."""
        t = None
        if target_op is not None:
            t = {"op": target_op}
            t.update({"ratio": ratio} if ratio is not None else {"value": value})
        r = {"what": what, "unit": unit, "ours": ours, "peer_name": peer_name, "peer": peer, "target": t}
        if t is None and ratio is not None:
            r["ratio"] = ratio
        if spread:
            r["spread"] = spread
        if note:
            r["note"] = note
        check_row(r)
        self.data["rows"].append(r)

    def write(self, path):
        with open(path, "w") as f:
            json.dump(self.data, f, indent=1)
            f.write("\n")
        print(f"# results written to {path} (bench/report makes docs/benchmarks.md from bench/results/)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="read JSON rows, one per line, from stdin; write the set to OUT")
    w.add_argument("out")
    w.add_argument("--bench", required=True)
    w.add_argument("--variant", required=True, choices=VARIANTS)
    w.add_argument("--command", required=True)
    w.add_argument("--note")
    w.add_argument("--load")
    a = ap.parse_args()
    rs = ResultSet(a.bench, a.variant, a.command, a.note, a.load)
    for line in sys.stdin:
        if line.strip():
            r = json.loads(line)
            check_row(r)
            rs.data["rows"].append(r)
    rs.write(a.out)


if __name__ == "__main__":
    main()
