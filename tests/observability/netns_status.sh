#!/bin/bash
# sparkrun status and the failure report of a job across 3 "hosts" (network namespaces, run
# inside tests/multihost/netns_fixture.sh, which exports MH_*):
#   netns_status.sh SPARKRUN OBSERVE_RANK
# First a 3-rank stream job: `sparkrun status` on the launch host answers from the launcher
# with every host's rows (gathered over the control plane), counters and lanes moving; its
# --metrics-port serves one exposition with every host's ranks.
# Then 3 ranks, one per host, over tcp; rank 1 (host b) stops itself after 80 allreduces. Before the
# others' timeout `sparkrun status` (from the root namespace: the daemons' sockets are on the
# shared /dev/shm) shows all 3 ranks of the job, rank 1 stopped and ranks 0 and 2 waiting on it
# over tcp. After it: the report folder holds every host's
# flight recorder file and its ranks' stacks when sparkrun exits (gathered by the launcher into
# SPARK_REPORT_DIR), rank 1 behind.
# Prints PASS or FAIL: <why>.
set -u
sparkrun=$1 rank=$2
work=$(mktemp -d /tmp/sparkrun-netns-status.XXXXXX)
job=
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- job output"; cat "$work/o" 2>/dev/null; exit 1; }
cd "$work" || exit 1

# A streaming job: `sparkrun status` on the launch host answers from the launcher, with every
# host's rows gathered over the control plane ("gathered"), counters moving between two looks.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
SPARK_TRANSPORT=tcp "$sparkrun" --launch-agent "$MH_AGENT" --control-net "$MH_NET" -n 3 \
  --host "$MH_HOSTS" --metrics-port "127.0.0.1:$port" "$rank" stream 20 >"$work/o" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q READY "$work/o" && break; sleep 0.1; done
grep -q READY "$work/o" || fail "the stream job never printed READY"
# --metrics-port across hosts: one exposition with every host's ranks.
python3 - "$port" "$MH_NS1" "$MH_NS2" "$MH_NS3" <<'PY' || fail "metrics across hosts"
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
assert text.count("# TYPE sparkrun_rank_operations counter") == 1, text
ops = dict(re.findall(r'sparkrun_rank_operations_total\{rank="(\d)",host="([^"]+)"\}', text))
assert ops == {"0": sys.argv[2], "1": sys.argv[3], "2": sys.argv[4]}, f"ranks and hosts {ops}\n{text}"
assert text.count("sparkrun_job_failures_total") == 1 and text.endswith("# EOF\n"), text
PY
launcher_job=$("$sparkrun" status --list --json | python3 -c '
import json, sys
for j in json.load(sys.stdin):
    if j["launcher_pid"] == int(sys.argv[1]):
        print(j["job"]); break' "$job")
[ -n "$launcher_job" ] || fail "sparkrun status --list does not show the launcher (pid $job)"
"$sparkrun" status "$launcher_job" --json >"$work/g1.json" || fail "status (gathered) failed"
sleep 0.5
"$sparkrun" status "$launcher_job" --json >"$work/g2.json" || fail "status (gathered) failed"
"$sparkrun" status "$launcher_job" || fail "sparkrun status $launcher_job failed"
python3 - "$work/g1.json" "$work/g2.json" "$MH_NS1" "$MH_NS2" "$MH_NS3" <<'PY' || fail "gathered status"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b.get("gathered") is True, f"not the launcher's gathered answer: {b}"
assert not b.get("missing_hosts"), f"hosts missing: {b['missing_hosts']}"
ra, rb = ({r["rank"]: r for r in s["ranks"]} for s in (a, b))
assert sorted(rb) == [0, 1, 2], f"ranks {sorted(rb)}"
for r in range(3):
    assert rb[r]["host"] == sys.argv[3 + r], f"rank {r} on {rb[r]['host']}"
    assert rb[r]["ops_completed"] > ra[r]["ops_completed"], f"rank {r}'s counters did not move"
    assert any(l["bytes_sent"] > 0 for l in rb[r]["lanes"]), f"rank {r}'s lanes: {rb[r]['lanes']}"
PY
wait "$job" || fail "the stream job failed"
job=

# The daemons put their parts in SPARK_REPORT_DIR (scripts/test sets one): here, this folder.
SPARK_REPORT_DIR=$work SPARK_TRANSPORT=tcp SPARKNET_ROCE_TIMEOUT_MS=12000 "$sparkrun" --launch-agent "$MH_AGENT" \
  --control-net "$MH_NET" -n 3 --host "$MH_HOSTS" "$rank" stop 1 80 >"$work/o" 2>&1 &
job=$!
for _ in $(seq 300); do grep -q "DIVERGING rank 1" "$work/o" && break; sleep 0.1; done
grep -q "DIVERGING rank 1" "$work/o" || fail "rank 1 never stopped itself"
sleep 1
# The job id: the one whose node runners are this test's daemons (in its namespaces).
ours=" $(ip netns pids "$MH_NS1") $(ip netns pids "$MH_NS2") $(ip netns pids "$MH_NS3") "
jobid=$("$sparkrun" status --list --json | python3 -c '
import json, sys
ours = sys.argv[1].split()
for j in json.load(sys.stdin):
    if str(j["launcher_pid"]) in ours:
        print(j["job"]); break' "$ours")
[ -n "$jobid" ] || fail "sparkrun status --list shows no node runner of this job"
"$sparkrun" status "$jobid" || fail "sparkrun status $jobid failed"
"$sparkrun" status "$jobid" --json >"$work/s.json" || fail "sparkrun status --json failed"
python3 - "$work/s.json" "$MH_NS1" "$MH_NS2" "$MH_NS3" <<'PY' || fail "status rows"
import json, sys
s = json.load(open(sys.argv[1]))
rows = {r["rank"]: r for r in s["ranks"]}
assert sorted(rows) == [0, 1, 2], f"ranks {sorted(rows)}"
for r in range(3):
    assert rows[r]["host"] == sys.argv[2 + r], f"rank {r} on {rows[r]['host']}"
assert rows[1]["state"] == "stopped", f"rank 1: {rows[1]['state']}"
for r in (0, 2):
    w = rows[r].get("current", {}).get("wait", {})
    assert rows[r]["state"] == "waiting" and w.get("peer") == 1 and w.get("waiting"), f"rank {r}: {rows[r]}"
    assert w.get("lane", "").startswith("tcp"), f"rank {r} lane {w.get('lane')}"
    assert w.get("seconds", 0) >= 0.5, f"rank {r} waited {w.get('seconds')} s"
PY
wait "$job"
rc=$?
job=
cat "$work/o"
[ "$rc" -ne 0 ] || fail "the job passed"
report=$(ls -d "$work"/report.* 2>/dev/null | head -1)
[ -n "$report" ] || fail "no report folder in SPARK_REPORT_DIR"
# Every host's part is there when sparkrun exits: the launcher writes what the daemons sent.
ls "$report"
grep -Eq "^sparkrun: report: $report \(every host's part: .*flight\.$MH_NS2\.json" "$work/o" ||
  fail "the launcher did not write the stopped rank's host's part"
python3 - "$report" "$MH_NS1" "$MH_NS2" "$MH_NS3" <<'PY' || fail "report contents"
import json, os, sys
report = sys.argv[1]
for r, host in enumerate(sys.argv[2:]):
    # Every host's part, the stopped rank's host's too: the launcher gathers them over the
    # control plane before it exits.
    f = json.load(open(os.path.join(report, f"flight.{host}.json")))
    ranks = {x["rank"]: x for x in f["ranks"]}
    assert list(ranks) == [r], f"{host}: ranks {list(ranks)}"
    last = ranks[r]["operations"][-1]
    want = 81 if r == 1 else 82
    assert last["seq"] == want, f"rank {r}: last seq {last['seq']}, expected {want}"
    # A timeout: every host's ranks' stacks, the stopped rank's host's too (told by the abort).
    stacks = open(os.path.join(report, f"stacks.{host}.txt")).read()
    assert f"=== rank {r} " in stacks, f"{host}: no stacks of rank {r}:\n{stacks[:2000]}"
PY
echo PASS
