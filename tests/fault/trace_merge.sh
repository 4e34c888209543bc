#!/usr/bin/env bash
# SPARK_TRACE on a failed run: rank 1 stops, the others time out (300 ms). sparkrun merges
# the per-rank traces into one JSON file (valid JSON, Chrome trace format) that shows, for
# each survivor, the wait on rank 1 at the failing seq and the failure record; the stopped
# rank has no file and is marked as such. A healthy run's trace has every rank's ops.
#   trace_merge.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
SPARK_TRANSPORT=shm SPARK_TRACE=$dir/failed.json SPARKNET_ROCE_TIMEOUT_MS=300 timeout 60 \
  "$sparkrun" -n 3 --kill-grace 2 "$prog" stop 1 5 >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
[ "$rc" -ne 0 ] || fail "the failed run exited 0"
grep -q "^sparkrun: trace of 2 of 3 ranks written to $dir/failed.json" "$dir/out" || fail "sparkrun did not report the merged trace"
/usr/bin/python3 - "$dir/failed.json" <<'PY' || fail "the merged trace of the failed run is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
ev = doc["traceEvents"]
for r in (0, 2):
    waits = [e for e in ev if e.get("pid") == r and e.get("ph") == "X" and e.get("args", {}).get("peer") == 1
             and e["args"].get("seq") == 8 and e["dur"] >= 300000]
    assert waits, "rank %d: no >= 300 ms wait on rank 1 at seq 8" % r
    fails = [e for e in ev if e.get("pid") == r and e.get("name") == "failure"]
    assert fails and "no data from rank 1" in fails[0]["args"]["record"], "rank %d: no failure event" % r
    ops = [e for e in ev if e.get("pid") == r and e.get("name") == "allreduce" and e.get("ph") == "X"]
    assert len(ops) >= 5, "rank %d: %d allreduce events" % (r, len(ops))
    assert all("seq" in e["args"] and "bytes" in e["args"] for e in ops)
assert any(e.get("pid") == 1 and e.get("name") == "no trace from rank 1" for e in ev), "rank 1 not marked"
print("merged trace OK:", len(ev), "events")
PY
SPARK_TRANSPORT=tcp SPARK_TRACE=$dir/ok.json timeout 60 "$sparkrun" -n 3 "$prog" healthy 20 >"$dir/out" 2>&1 ||
  { cat "$dir/out"; fail "the healthy run failed"; }
/usr/bin/python3 - "$dir/ok.json" <<'PY' || fail "the merged trace of the healthy run is wrong"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
for r in range(3):
    n = len([e for e in ev if e.get("pid") == r and e.get("name") == "allreduce"])
    assert n == 20, "rank %d: %d allreduce events, expected 20" % (r, n)
    assert any(e.get("pid") == r and e.get("args", {}).get("lane", "").startswith("tcp:") for e in ev), "rank %d: no wait with a lane" % r
print("healthy trace OK")
PY
echo PASS
