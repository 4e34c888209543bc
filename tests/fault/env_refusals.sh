#!/usr/bin/env bash
# The refused environment variables, end to end: sparkrun checks the ranks' environment (its
# own and -x) against the knob table before starting anything (docs/reliability.md): exit 2,
# the rank's exact message once, no rank started. The same values given with -x too.
#   env_refusals.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
check() {  # VAR=VALUE EXPECTED_MESSAGE
  local assign=$1 want=$2 how
  for how in env -x; do
    if [ "$how" = env ]; then
      env "$assign" timeout 60 "$sparkrun" -n 2 "$prog" healthy 3 >"$out" 2>&1
    else
      timeout 60 "$sparkrun" -x "$assign" -n 2 "$prog" healthy 3 >"$out" 2>&1
    fi
    local rc=$?
    echo "--- $how $assign: exit $rc"; cat "$out"
    [ "$rc" -eq 2 ] || fail "$how $assign: exit $rc, expected 2 (refused before launch)"
    grep -q "^sparkrun: no rank was started" "$out" || fail "$how $assign: ranks may have started"
    grep -q COMPLETED "$out" && fail "$how $assign: the job ran"
    check_message "$how $assign" "$want"
  done
  # The same words as the rank's own refusal (a rank started without sparkrun: singleton).
  env "$assign" timeout 30 "$prog" healthy 1 >"$out" 2>&1
  check_message "rank alone, $assign" "$want"
}
check_message() {
  local assign=$1 want=$2
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
