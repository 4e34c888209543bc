#!/usr/bin/env python3
"""sparkrun status, the flight recorder and the stacks of a failed job, end to end.

    observe.py SPARKRUN OBSERVE_RANK

1. status on a running 3-rank job: every rank present, its counters and its shm lanes to both
   peers moving between two looks;
   the status socket is 0600 in a 0700 job dir; a healthy job writes no report.
2. a SIGSTOPped rank, before the others' timeout: status shows it stopped and the others
   waiting on it (peer, lane, seconds); `status --stacks` writes every rank's stacks. After the
   timeout: the report folder holds every rank's recorder (the stopped one behind) and stacks
   with the waiting frame (wait_slow), and sparkrun names the folder in one line.
3. a rank that sleeps before every allreduce: one warning naming it. (That equal ranks late by
   turns get none is observability.SlowRank.*: here a suite beside this test may load one
   core for seconds, and then a warning would be right.)
4. a collective mismatch: the recorder names the rank that called another collective.
Prints PASS, or FAIL: <why> and exits 1. Leaves no process, segment or folder behind.
"""
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

SPARKRUN, RANK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []
launcher_pids = []  # this test's sparkrun processes: their segments must be gone at the end
STOP_AFTER = 80  # allreduces before rank 1 stops: more than the recorder's 64 operations


def check(ok, why):
    if not ok:
        failures.append(why)
        print("FAIL: " + why, flush=True)
    return ok


def status(pid, *args):
    r = subprocess.run([SPARKRUN, "status", str(pid), *args], capture_output=True, text=True,
                       timeout=40)
    if r.returncode != 0:
        raise RuntimeError(f"sparkrun status {pid} {' '.join(args)}: rc {r.returncode}: "
                           f"{r.stderr.strip()}")
    return r.stdout


def start(args, env_extra, cwd):
    # Default report folders in `cwd` (scripts/test points SPARK_REPORT_DIR elsewhere).
    env = dict(os.environ, SPARK_TRANSPORT="shm", SPARK_REPORT_DIR=cwd, **env_extra)
    log = open(os.path.join(cwd, "job.log"), "w+")
    p = subprocess.Popen([SPARKRUN, "-n", "3", "--kill-grace", "1", *args], stdout=log,
                         stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)
    launcher_pids.append(p.pid)
    return p, log


def wait_for(log, text, seconds):
    end = time.time() + seconds
    while time.time() < end:
        log.seek(0)
        if text in log.read():
            return True
        time.sleep(0.05)
    return False


def output(log):
    log.seek(0)
    return log.read()


def finish(p, seconds):
    try:
        return p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def case_running(work):
    p, log = start([RANK, "stream", "8"], {}, work)
    try:
        if not check(wait_for(log, "READY", 30), "stream job never printed READY"):
            return
        jobs = json.loads(subprocess.run([SPARKRUN, "status", "--list", "--json"],
                                         capture_output=True, text=True, timeout=30).stdout)
        mine = [j for j in jobs if j["launcher_pid"] == p.pid]
        check(len(mine) == 1, f"status --list does not show sparkrun pid {p.pid}: {jobs}")
        if mine:
            d = mine[0]["dir"]
            check(stat.S_IMODE(os.stat(d).st_mode) == 0o700, f"job dir {d} is not 0700")
            sock = os.path.join(d, "status.sock")
            check(stat.S_IMODE(os.stat(sock).st_mode) == 0o600, f"{sock} is not 0600")
        first = json.loads(status(p.pid, "--json"))
        time.sleep(0.5)
        second = json.loads(status(p.pid, "--json"))
        print(status(p.pid), flush=True)
        check(sorted(r["rank"] for r in second["ranks"]) == [0, 1, 2],
              f"not every rank in the status: {second['ranks']}")
        for a, b in zip(first["ranks"], second["ranks"]):
            check(b["state"] in ("running", "waiting"), f"rank {b['rank']} is {b['state']}")
            check(b.get("current", {}).get("op") == "allreduce",
                  f"rank {b['rank']}: current op {b.get('current')}")
            check(b.get("ops_completed", 0) > a.get("ops_completed", 0),
                  f"rank {b['rank']}: ops_completed did not move "
                  f"({a.get('ops_completed')} -> {b.get('ops_completed')})")
            check(b.get("ops_per_s", 0) > 0, f"rank {b['rank']}: no rate: {b}")
            # ops_completed counts init's barrier (0 bytes) too
            check(b.get("bytes_completed", 0) >= 1024 * (b.get("ops_completed", 0) - 1),
                  f"rank {b['rank']}: bytes {b.get('bytes_completed')} for "
                  f"{b.get('ops_completed')} 1 KiB ops")
            # Per lane: one shm lane to each peer, its bytes sent moving, a rate.
            lanes = {l["peer"]: l for l in b.get("lanes", [])}
            check(sorted(lanes) == sorted({0, 1, 2} - {b["rank"]}),
                  f"rank {b['rank']}: lanes {b.get('lanes')}")
            before = {l["peer"]: l["bytes_sent"] for l in a.get("lanes", [])}
            for peer, l in lanes.items():
                check(l["lane"] == "shm" and l["bytes_sent"] > before.get(peer, 0)
                      and l.get("bytes_per_s", 0) > 0,
                      f"rank {b['rank']} lane to rank {peer} did not move: {l} (was "
                      f"{before.get(peer)})")
    finally:
        rc = finish(p, 60)
    check(rc == 0, f"stream job: sparkrun exited {rc}:\n{output(log)}")
    check(not [f for f in os.listdir(work) if f.startswith("report.")],
          "a healthy job wrote a report folder")


def case_stopped(work):
    report = os.path.join(work, "stopped-report")
    p, log = start(["--report-dir", report, RANK, "stop", "1", str(STOP_AFTER)],
                   {"SPARKNET_ROCE_TIMEOUT_MS": "5000"}, work)
    try:
        if not check(wait_for(log, "DIVERGING rank 1", 30), "rank 1 never stopped itself"):
            return
        time.sleep(1.0)
        s = json.loads(status(p.pid, "--json"))
        print(status(p.pid), flush=True)
        rows = {r["rank"]: r for r in s["ranks"]}
        check(rows.get(1, {}).get("state") == "stopped", f"rank 1 not shown stopped: {rows.get(1)}")
        for r in (0, 2):
            row = rows.get(r, {})
            w = row.get("current", {}).get("wait", {})
            check(row.get("state") == "waiting", f"rank {r} not shown waiting: {row}")
            check(w.get("peer") == 1 and w.get("waiting"), f"rank {r} does not wait on rank 1: {w}")
            check(w.get("lane") == "shm", f"rank {r}: lane {w.get('lane')}, expected shm")
            check(0.5 <= w.get("seconds", 0) <= 5.5, f"rank {r}: waited {w.get('seconds')} s")
            check(row["current"].get("seq") == STOP_AFTER + 2,
                  f"rank {r}: seq {row['current'].get('seq')}, expected {STOP_AFTER + 2}")
        live = json.loads(status(p.pid, "--stacks", "--json"))
        f = live.get("file", "")
        check(f and os.path.exists(f), f"status --stacks wrote no file: {live}")
        if f and os.path.exists(f):
            text = open(f).read()
            check(all(f"=== rank {r} " in text for r in range(3)), "status --stacks: not every rank")
            os.remove(f)
    finally:
        rc = finish(p, 60)
    out = output(log)
    print(out, flush=True)
    check(rc not in (0, None), f"stopped job: sparkrun exited {rc}")
    check(f"sparkrun: report: {report} (flight.json; stacks.txt" in out,
          "no line naming the report folder")
    check(f"rank 1 is behind on world: its last operation is allreduce seq {STOP_AFTER + 1}" in out,
          "the report does not say that rank 1 is behind")
    try:
        flight = json.load(open(os.path.join(report, "flight.json")))
    except (OSError, ValueError) as e:
        check(False, f"no readable flight.json: {e}")
        return
    ranks = {r["rank"]: r for r in flight["ranks"]}
    check(sorted(ranks) == [0, 1, 2], f"flight.json lacks a rank: {sorted(ranks)}")
    for r, f in ranks.items():
        ops = f["operations"]
        check(len(ops) == 64, f"rank {r}: {len(ops)} operations recorded, expected 64")
        last = ops[-1] if ops else {}
        # init's barrier is seq 1, allreduce i seq 2+i: the stopped rank completed STOP_AFTER
        want = STOP_AFTER + 1 if r == 1 else STOP_AFTER + 2
        check(last.get("seq") == want, f"rank {r}: last seq {last.get('seq')}, expected {want}")
        if r != 1:
            check(last.get("state") == "failed" and last.get("wait", {}).get("peer") == 1,
                  f"rank {r}: last operation {last}")
    try:
        stacks = open(os.path.join(report, "stacks.txt")).read()
    except OSError as e:
        check(False, f"no stacks.txt: {e}")
        return
    sections = stacks.split("=== rank ")[1:]
    check(len(sections) == 3, f"stacks.txt has {len(sections)} rank sections")
    for sec in sections:
        r = int(sec.split()[0])
        if r != 1:
            check("wait_slow" in sec, f"rank {r}'s stack has no waiting frame (wait_slow)")
        else:
            check("main" in sec, "the stopped rank's stack has no main")


def case_slow(work):
    p, log = start([RANK, "slow", "2", "7"], {}, work)
    rc = finish(p, 60)
    out = output(log)
    print(out, flush=True)
    check(rc == 0, f"slow job: sparkrun exited {rc}")
    warnings = [l for l in out.splitlines() if "arrived last" in l]
    check(len(warnings) == 1 and warnings[0].startswith("sparkrun: warning: rank 2 (host "),
          f"expected one slow-rank warning naming rank 2, got {warnings}")


def case_mismatch(work):
    report = os.path.join(work, "mismatch-report")
    p, log = start(["--report-dir", report, RANK, "mismatch", "2", "10"], {}, work)
    rc = finish(p, 60)
    out = output(log)
    print(out, flush=True)
    check(rc not in (0, None), f"mismatch job: sparkrun exited {rc}")
    note = ("rank 2 diverged on world at seq 12: it called broadcast where 2 other rank(s) "
            "called allreduce")
    check(note in out, "sparkrun does not name the diverging rank")
    try:
        flight = json.load(open(os.path.join(report, "flight.json")))
    except (OSError, ValueError) as e:
        check(False, f"no readable flight.json: {e}")
        return
    check(note in flight.get("divergence", []), f"flight.json divergence: {flight.get('divergence')}")
    last = {r["rank"]: r["operations"][-1] for r in flight["ranks"] if r["operations"]}
    check(last.get(2, {}).get("op") == "broadcast" and last[2].get("seq") == 12,
          f"rank 2's last recorded operation: {last.get(2)}")
    check(not os.path.exists(os.path.join(report, "stacks.txt")),
          "stacks collected for a mismatch (only timeouts get them)")


def main():
    work = tempfile.mkdtemp(prefix="sparkrun-observe.")
    try:
        for case in (case_running, case_stopped, case_slow, case_mismatch):
            print(f"--- {case.__name__}", flush=True)
            try:
                case(work)
            except Exception as e:  # noqa: BLE001: any error is a failed check
                check(False, f"{case.__name__}: {e}")
        time.sleep(0.2)
        # Segments of this test's jobs only (job ids are sparkrun.PID.X; other jobs may run).
        left = [f for f in os.listdir("/dev/shm")
                if any(f.startswith(f"spark-sparkrun_{pid}_") for pid in launcher_pids)]
        check(not left, f"segments of this test's jobs left in /dev/shm: {sorted(left)}")
        procs = subprocess.run(["pgrep", "-x", os.path.basename(RANK)], capture_output=True,
                               text=True).stdout.split()
        check(not procs, f"rank processes left: {procs}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
