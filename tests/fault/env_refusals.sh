#!/usr/bin/env bash
# The refused environment variables, end to end: init fails on every rank, sparkrun exits
# non-zero, and the exact message appears in sparkrun's output (once per rank that printed it,
# and once as the record of the abort; here -n 1 so the message appears exactly once).
#   env_refusals.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
check() {  # VAR=VALUE EXPECTED_MESSAGE
  local assign=$1 want=$2
  env "$assign" timeout 60 "$sparkrun" -n 1 "$prog" healthy 3 >"$out" 2>&1
  local rc=$?
  echo "--- $assign: exit $rc"; cat "$out"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$assign: exit $rc"
  grep -q COMPLETED "$out" && fail "$assign: the job ran"
  local n; n=$(grep -cF -- "$want" "$out")
  [ "$n" -eq 1 ] || fail "$assign: the exact message appears $n times, expected once: $want"
}
spin='SPARKNET_ROCE_SPIN_LIMIT is set ("1000000") but is no longer supported: it counted polls and was replaced by SPARKNET_ROCE_TIMEOUT_MS, in milliseconds (default 10000). Do not copy the old value over: unset SPARKNET_ROCE_SPIN_LIMIT and, if the default does not fit, set SPARKNET_ROCE_TIMEOUT_MS to a number of milliseconds'
check SPARKNET_ROCE_SPIN_LIMIT=1000000 "$spin"
check SPARKNET_ROCE_KERNELS=1 'SPARKNET_ROCE_KERNELS is set ("1") but this option was removed and has no replacement: unset SPARKNET_ROCE_KERNELS'
check SPARKNET_ROCE_KERNELS= 'SPARKNET_ROCE_KERNELS is set ("") but this option was removed and has no replacement: unset SPARKNET_ROCE_KERNELS'
for v in "" 0 -5 abc 12x 99999999999; do
  check "SPARKNET_ROCE_TIMEOUT_MS=$v" "SPARKNET_ROCE_TIMEOUT_MS=\"$v\" is refused: "
  grep -F "SPARKNET_ROCE_TIMEOUT_MS=\"$v\" is refused: " "$out" | grep -Eq "valid: milliseconds in [0-9]+\.\.[0-9]+" ||
    fail "SPARKNET_ROCE_TIMEOUT_MS=$v: the message does not give the valid range"
done
echo PASS
