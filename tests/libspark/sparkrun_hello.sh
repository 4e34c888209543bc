#!/usr/bin/env bash
# The demo under sparkrun: SPARKRUN HELLO TRANSPORT [RANKS (default 3)]. Every rank greets, rank 0
# prints the checked sum; sparkrun must exit 0.
set -u
n=${4:-3}
out=$(SPARK_TRANSPORT=$3 timeout 60 "$1" -n "$n" "$2" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: sparkrun exited $rc"; exit 1; }
[ "$(grep -c "^.*hello from rank [0-9]* of $n on .* (transport $3)" <<<"$out")" -eq "$n" ] || { echo "FAIL: not $n greetings over $3"; exit 1; }
grep -q "allreduce of ranks 0..$((n - 1)): sum $((n * (n - 1) / 2)) (correct on every rank)" <<<"$out" || { echo "FAIL: no checked sum"; exit 1; }
echo PASS
