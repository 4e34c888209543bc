#!/usr/bin/env bash
# Fail-stop end to end under sparkrun: SPARKRUN FAULT_RANK TRANSPORT MODE
#   kill: a rank SIGKILLs itself -> sparkrun exits non-zero quickly, no rank remains
#   stop: a rank SIGSTOPs itself -> survivors time out after 300 ms, sparkrun prints their
#         records ("sparkrun: rank R: allreduce seq S step 0: no data from rank 1 on lane ...")
#         and exits non-zero
set -u
sparkrun=$1 prog=$2 transport=$3 mode=$4
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s%N)
SPARK_TRANSPORT=$transport SPARKNET_ROCE_TIMEOUT_MS=300 timeout 60 "$sparkrun" -n 3 "$prog" "$mode" 1 100000 >"$out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$out"
echo "sparkrun exit $rc after $ms ms"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "sparkrun exited 0 although rank 1 was ${mode}ed"
[ "$rc" -ne 124 ] || fail "the job hung (timeout 60 s)"
[ "$ms" -lt 20000 ] || fail "took $ms ms"
# The ranks ran and rank 1 did what it was told (not "exit 127: cannot execute" or a crash).
if [ "$mode" = kill ]; then
  grep -Eq "^sparkrun: rank 1 \(pid [0-9]+\) was killed by signal 9 \(SIGKILL|: rank 1 closed its connection" "$out" ||
    fail "neither sparkrun nor a survivor's record says that rank 1 was killed"
fi
if [ "$mode" = stop ]; then
  grep -Eq "sparkrun: (.*: )?rank [02]: allreduce seq [0-9]+ step [0-9]+: no data from rank 1 on lane (shm|tcp:[0-9]+) after 3[0-9][0-9] ms \(timeout 300 ms\)" "$out" ||
    fail "no failure record line naming rank 1, the lane and the timeout"
fi
pgrep -f "$prog $mode 1 100000" >/dev/null && fail "ranks of the job are still running"
echo PASS
