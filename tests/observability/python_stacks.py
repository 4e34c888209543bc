#!/usr/bin/env python3
"""Python ranks' frames in the stacks of a job that timed out.

    python_stacks.py SPARKRUN

Two Python ranks under sparkrun: rank 1 sleeps in Python (a slow rank) while rank 0 waits for
it in allreduce until its fail-stop timeout (2 s). The report's stacks.txt must hold, for both
ranks, the Python frames that the libspark package's faulthandler wrote (rank 0 inside
`step`, rank 1 inside `slow_preparation`) and rank 0's native waiting frame (wait_slow).
Prints PASS, or FAIL: <why>. Needs PYTHONPATH with the built libspark package."""
import os
import shutil
import subprocess
import sys
import tempfile

SPARKRUN = os.path.abspath(sys.argv[1])
RANK_CODE = r'''
import time
import numpy as np
import libspark

comm = libspark.init()
x = np.ones(256, np.float32)


def step():
    comm.allreduce(x)


def slow_preparation():
    time.sleep(30)


for i in range(20):
    if i == 10 and comm.rank == 1:
        slow_preparation()
    step()
'''


def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def main():
    work = tempfile.mkdtemp(prefix="sparkrun-pystacks.")
    try:
        report = os.path.join(work, "report")
        env = dict(os.environ, SPARK_TRANSPORT="shm", SPARKNET_ROCE_TIMEOUT_MS="2000")
        try:
            r = subprocess.run([SPARKRUN, "-n", "2", "--kill-grace", "1", "--report-dir", report,
                                sys.executable, "-c", RANK_CODE], capture_output=True, text=True,
                               env=env, cwd=work, timeout=90)
        except subprocess.TimeoutExpired:
            fail("the job did not end within 90 s")
        print(r.stdout + r.stderr, flush=True)
        if r.returncode == 0:
            fail("the job passed; rank 0 should have timed out")
        try:
            stacks = open(os.path.join(report, "stacks.txt")).read()
        except OSError as e:
            fail(f"no stacks.txt in the report: {e}")
        print(stacks[:6000], flush=True)
        sections = {int(s.split()[0]): s for s in stacks.split("=== rank ")[1:]}
        if sorted(sections) != [0, 1]:
            fail(f"stacks.txt has ranks {sorted(sections)}")
        for rank, frame in ((0, "in step"), (1, "in slow_preparation")):
            sec = sections[rank]
            if "--- Python frames (faulthandler) ---" not in sec:
                fail(f"rank {rank}: no Python frames")
            if frame not in sec:
                fail(f"rank {rank}: no Python frame '{frame}'")
        if "wait_slow" not in sections[0]:
            fail("rank 0: no native waiting frame (wait_slow)")
        print("PASS")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
