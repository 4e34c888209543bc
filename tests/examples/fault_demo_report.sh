#!/usr/bin/env bash
# The reports docs/examples/fault_demo.md shows: a killed rank is named by sparkrun in one
# line (exit 137); a stopped rank is named in libspark's fail-stop record after the timeout.
#   fault_demo_report.sh SPARKRUN FAULT_DEMO
set -u
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
timeout 60 "$sparkrun" -n 3 "$prog" --kill-rank 2 --after 3 --delay-ms 20 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 137 ] || fail "kill: sparkrun exited $rc, expected 137"
first=$(grep '^sparkrun: ' "$out" | grep -v '^sparkrun: note: ' | head -n 1)
echo "$first" | grep -Eq '^sparkrun: rank 2 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL: Killed\); stopping the job$' ||
  fail "kill: unexpected first report: $first"
grep -q '^step 2: allreduce' "$out" || fail "kill: steps before the kill are missing"
grep -q 'all 20 steps done' "$out" && fail "kill: the job completed"
SPARKNET_ROCE_TIMEOUT_MS=1500 timeout 60 "$sparkrun" -n 3 --kill-grace 1 "$prog" --kill-rank 2 --after 3 --how stop --delay-ms 20 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "stop: sparkrun exited $rc"
first=$(grep '^sparkrun: ' "$out" | grep -v '^sparkrun: note: ' | head -n 1)
echo "$first" | grep -Eq '^sparkrun: rank ([01]) aborted: rank \1: allreduce seq [0-9]+ step [0-9]+: no data from rank 2 on lane [a-z]+(:[0-9]+)? after [0-9]+ ms \(timeout 1500 ms\)$' ||
  fail "stop: unexpected first report: $first"
echo PASS
