#!/usr/bin/env python3
"""sparkrun --metrics-port scraped by a real Prometheus server.

    metrics.py SPARKRUN OBSERVE_RANK

A 3-rank job of 1 KiB allreduces serves OpenMetrics on a loopback port; a Prometheus server
(Debian's `prometheus`, started here on loopback with a private data folder) scrapes it every
second; the test reads `sparkrun_rank_operations_total` back through Prometheus' HTTP API: one
series per rank, each above zero, the wait histogram's count and `sparkrun_lane_bytes_total`
of each rank's shm lane to each peer. Exits 77 (skip) with the
reason when no prometheus binary is installed (scripts/deps --test installs it).
Prints PASS, or FAIL: <why>."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from free_port import free_port  # noqa: E402

SPARKRUN, RANK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def fail(why):
    print(f"FAIL: {why}", flush=True)
    sys.exit(1)


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIP: no prometheus binary (Debian package prometheus; scripts/deps --test)")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="sparkrun-metrics.")
    job = prom = None
    try:
        mport = free_port()
        pport = free_port(mport)
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "scrape_configs:\n  - job_name: sparkrun\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n")
        job_log = open(os.path.join(work, "job.log"), "w+")
        job = subprocess.Popen([SPARKRUN, "-n", "3", "--metrics-port", f"127.0.0.1:{mport}",
                                RANK, "stream", "20"], stdout=job_log, stderr=subprocess.STDOUT,
                               env=dict(os.environ, SPARK_TRANSPORT="shm"), cwd=work,
                               start_new_session=True)
        prom_log = open(os.path.join(work, "prometheus.log"), "w+")
        prom = subprocess.Popen([prometheus, "--config.file", os.path.join(work, "prometheus.yml"),
                                 "--storage.tsdb.path", os.path.join(work, "data"),
                                 "--web.listen-address", f"127.0.0.1:{pport}"],
                                stdout=prom_log, stderr=subprocess.STDOUT, cwd=work,
                                start_new_session=True)
        series, err = [], ""
        end = time.time() + 18
        while time.time() < end:
            time.sleep(1)
            if job.poll() is not None:
                break
            try:
                series = query(pport, "sparkrun_rank_operations_total")
                if len(series) == 3 and all(float(s["value"][1]) > 0 for s in series):
                    break
            except OSError as e:  # Prometheus still starting
                err = str(e)
        print("series:", json.dumps(series), flush=True)
        if len(series) != 3:
            prom_log.seek(0)
            job_log.seek(0)
            fail(f"Prometheus holds {len(series)} series of sparkrun_rank_operations_total, "
                 f"expected 3 ({err})\n{prom_log.read()[-3000:]}\n{job_log.read()[-2000:]}")
        ranks = sorted(s["metric"].get("rank") for s in series)
        if ranks != ["0", "1", "2"]:
            fail(f"ranks in the series: {ranks}")
        if not all(float(s["value"][1]) > 0 for s in series):
            fail(f"a rank has no operations: {series}")
        waits = query(pport, "sparkrun_rank_wait_seconds_count")
        if len(waits) != 3:
            fail(f"wait histogram: {len(waits)} series, expected 3")
        # Per lane: each rank's shm lane to each of its 2 peers, bytes sent.
        lanes = query(pport, "sparkrun_lane_bytes_total")
        pairs = sorted((s["metric"].get("rank"), s["metric"].get("peer")) for s in lanes)
        if pairs != [("0", "1"), ("0", "2"), ("1", "0"), ("1", "2"), ("2", "0"), ("2", "1")]:
            fail(f"lane series (rank, peer): {pairs}")
        if not all(s["metric"].get("lane") == "shm" and float(s["value"][1]) > 0 for s in lanes):
            fail(f"a lane carried nothing: {lanes}")
        up = query(pport, 'up{job="sparkrun"}')
        if not up or up[0]["value"][1] != "1":
            fail(f"the scrape target is not up: {up}")
        print("PASS")
    finally:
        for p in (prom, job):
            if p and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
