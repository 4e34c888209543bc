#!/usr/bin/env bash
# Skewed start through sparkrun: 3 ranks, SPARKNET_ROCE_TIMEOUT_MS=300, rank 2 sleeps 600 ms
# (2x the timeout) after init. With barrier() first the job passes (exit 0, every rank
# completes 5 verified allreduces); without it, ranks 0 and 1 fail in their first allreduce
# (seq 2) with a record naming rank 2, and sparkrun exits non-zero.
#   skewed_start.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for transport in tcp shm; do
  lane='tcp:[0-9]+'; [ "$transport" = shm ] && lane=shm
  SPARK_TRANSPORT=$transport SPARKNET_ROCE_TIMEOUT_MS=300 timeout 60 "$sparkrun" -n 3 "$prog" skew barrier 600 >"$out" 2>&1
  rc=$?
  echo "--- $transport, barrier: exit $rc"; cat "$out"
  [ "$rc" -eq 0 ] || fail "$transport: the job failed although every rank called barrier() first"
  [ "$(grep -c '^COMPLETED' "$out")" -eq 3 ] || fail "$transport: not every rank completed"
  SPARK_TRANSPORT=$transport SPARKNET_ROCE_TIMEOUT_MS=300 timeout 60 "$sparkrun" -n 3 --kill-grace 1 "$prog" skew none 600 >"$out" 2>&1
  rc=$?
  echo "--- $transport, no barrier: exit $rc"; cat "$out"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$transport: exit $rc without barrier"
  grep -q "WRONG DATA\|COMPLETED" "$out" && fail "$transport: a rank completed without barrier"
  for r in 0 1; do
    grep -Eq "^sparkrun: rank $r aborted: rank $r: allreduce seq 2 step [0-9]+: no data from rank 2 on lane $lane after [0-9]+ ms \(timeout 300 ms\)$" "$out" ||
      fail "$transport: no record of rank $r naming the late rank 2 at seq 2"
  done
done
echo PASS
