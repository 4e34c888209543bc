#!/usr/bin/env bash
# expert_parallel on 1, 2 and 3 ranks: each run's rank 0 recomputes every step alone and finds
# the same bits (--check), and the checksums of the three runs are equal.
#   expert_parallel_check.sh SPARKRUN EXPERT_PARALLEL
set -u
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sums=""
for n in 1 2 3; do
  timeout 60 "$sparkrun" -n $n "$prog" --tokens 96 --dim 32 --experts 6 --ffn 48 --steps 3 --check >"$out" 2>&1 ||
    { cat "$out"; fail "-n $n exited $?"; }
  cat "$out"
  grep -q '^check: identical to the single-rank computation' "$out" || fail "-n $n: check did not pass"
  grep -Eq "^expert_parallel: $n ranks, 6 experts, 96 tokens x 3 steps: [0-9]+ tokens/s; alltoallv " "$out" ||
    fail "-n $n: no report line"
  sums="$sums $(grep '^checksum:' "$out")"
done
[ "$(echo $sums | tr ' ' '\n' | grep -v checksum: | sort -u | wc -l)" -eq 1 ] || fail "checksums differ:$sums"
timeout 60 "$sparkrun" -n 4 "$prog" --experts 6 >"$out" 2>&1 && fail "-n 4 with 6 experts was accepted"
grep -q 'must be multiples of the rank count 4' "$out" || { cat "$out"; fail "-n 4: no clear message"; }
echo PASS
