#!/usr/bin/env bash
# GPU fail-stop end to end: SPARKRUN PROG. Rank 1 of 2 stops after one device allreduce; the
# job must end non-zero within seconds, with sparkrun printing rank 0's record naming rank 1.
# Exit 77 (skip) when the ranks find no GPU.
set -u
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
SPARKNET_ROCE_TIMEOUT_MS=500 timeout 120 "$sparkrun" -n 2 "$prog" >"$out" 2>&1
rc=$?
cat "$out"
if grep -q "SKIP: no CUDA device" "$out"; then echo "SKIP: no CUDA device"; exit 77; fi
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "sparkrun exited 0 although rank 1 stopped"
[ "$rc" -ne 124 ] || fail "the job hung"
grep -Eq "sparkrun: (.*: )?rank 0: allreduce seq [0-9]+ step [0-9]+: no data from rank 1" "$out" ||
  fail "no failure record line naming rank 1"
pgrep -f "$prog" >/dev/null && fail "ranks of the job are still running"
echo PASS
