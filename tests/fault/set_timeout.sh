#!/usr/bin/env bash
# set_timeout_ms mid-run, measured: SPARKNET_ROCE_TIMEOUT_MS=60000, the survivors call
# set_timeout_ms(400) after 3 of 6 allreduces, then rank 1 stops. The records must say
# timeout 400 ms, waited >= 400 ms, and the job must end long before 60 s (the whole job,
# start-up included: 1-3 s natively, 14 s under qemu-user at load 16, so the bound is 30 s).
#   set_timeout.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
marker="fsto$$"
t0=$(now_ms)
SPARK_TRANSPORT=tcp SPARKNET_ROCE_TIMEOUT_MS=60000 timeout 100 "$sparkrun" -n 3 --kill-grace 2 \
  "$prog" stop 1 6 400 "$marker" >"$out" 2>&1
rc=$?
ms=$(( $(now_ms) - t0 ))
cat "$out"; echo "exit $rc after $ms ms"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "exit $rc"
for r in 0 2; do
  line=$(grep -E "^sparkrun: rank $r aborted: rank $r: allreduce seq 9 step [0-9]+: no data from rank 1 on lane tcp:[0-9]+ after [0-9]+ ms \(timeout 400 ms\)$" "$out") ||
    fail "no record of rank $r with timeout 400 ms"
  w=$(echo "$line" | sed -E 's/.* after ([0-9]+) ms .*/\1/')
  [ "$w" -ge 400 ] && [ "$w" -le 3000 ] || fail "rank $r waited $w ms for a 400 ms timeout"
  echo "rank $r: effective timeout 400 ms, waited $w ms"
done
[ "$ms" -lt 30000 ] || fail "the job took $ms ms: the 60 s timeout from the environment was used"
[ -z "$(leftovers "$marker")" ] || fail "processes of the job remain"
echo PASS
