#!/usr/bin/env bash
# The demo under sparkrun: SPARKRUN HELLO TRANSPORT. Every rank greets, rank 0 prints the
# checked sum; sparkrun must exit 0.
set -u
out=$(SPARK_TRANSPORT=$3 timeout 60 "$1" -n 3 "$2" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: sparkrun exited $rc"; exit 1; }
[ "$(grep -c "^.*hello from rank [0-2] of 3 on .* (transport $3)" <<<"$out")" -eq 3 ] || { echo "FAIL: not 3 greetings over $3"; exit 1; }
grep -q "allreduce of ranks 0..2: sum 3 (correct on every rank)" <<<"$out" || { echo "FAIL: no checked sum"; exit 1; }
echo PASS
