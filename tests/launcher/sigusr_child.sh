#!/usr/bin/env bash
# sigusr_child.sh SPARKRUN: SIGUSR1 to sparkrun reaches the rank's own process and spares the
# rank's child (which keeps SIGUSR1's default action: terminate); with --signal-group the whole
# process group gets it and the child dies. Bounded: every wait has a deadline.
set -uo pipefail
sparkrun=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The rank: a child with default signal handling, then report the child's state on SIGUSR1.
rank='sleep 30 & child=$!
report() { s=$(ps -o stat= -p "$child" 2>/dev/null); case "$s" in ""|Z*) echo child-gone;; *) echo child-alive;; esac; kill "$child" 2>/dev/null; exit 0; }
trap report USR1; echo ready; while :; do sleep 0.05; done'

run_case() {  # run_case EXPECTED [sparkrun options...]
  local expected=$1; shift
  local out=$work/out.$expected
  "$sparkrun" -n 1 --timeout 20 "$@" bash -c "$rank" >"$out" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do grep -q ready "$out" && break; sleep 0.05; done
  grep -q ready "$out" || { echo "FAIL: the rank never started"; cat "$out"; kill "$pid"; return 1; }
  kill -USR1 "$pid"
  wait "$pid"; local rc=$?
  if [[ $rc -ne 0 ]] || ! grep -q "^$expected\$" "$out"; then
    echo "FAIL: sparkrun $* (exit $rc): expected $expected"; cat "$out"; return 1
  fi
  echo "ok: sparkrun $*: $expected"
}
run_case child-alive || exit 1
run_case child-gone --signal-group || exit 1
echo PASS
