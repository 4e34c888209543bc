#!/usr/bin/env bash
# kill -9 of one rank at a seeded random moment inside a stream of verified allreduces,
# TRIALS trials per transport (tcp, shm), 3 ranks under sparkrun. Each trial: sparkrun exits
# non-zero, its first report names the dead rank, no survivor saw wrong data or completed,
# and no process of the job remains (found by a marker unique to the trial).
#   kill_trials.sh SPARKRUN FAULT_STREAM TRIALS
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2 trials=${3:-20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for transport in tcp shm; do
  for seed in $(seq 1 "$trials"); do
    victim=$((seed % 3))
    marker="fskill$$x${transport}x$seed"
    t0=$(now_ms)
    # The seed doubles as the marker-carrying argument: "kill SEED MARKER" (extra args ignored).
    SPARK_TRANSPORT=$transport timeout 60 "$sparkrun" -n 3 --kill-grace 1 "$prog" kill "$seed" "$marker" >"$out" 2>&1
    rc=$?
    ms=$(( $(now_ms) - t0 ))
    first=$(grep -v "^sparkrun: note:" "$out" | grep -m1 "^sparkrun: ")
    echo "$transport seed $seed victim $victim: exit $rc, $ms ms, first: $first"
    [ "$rc" -ne 0 ] || { cat "$out"; fail "$transport seed $seed: sparkrun exited 0"; }
    [ "$rc" -ne 124 ] || { cat "$out"; fail "$transport seed $seed: the job hung"; }
    grep -q "WRONG DATA" "$out" && { cat "$out"; fail "$transport seed $seed: a survivor computed wrong data"; }
    grep -q "COMPLETED" "$out" && { cat "$out"; fail "$transport seed $seed: a survivor completed its stream"; }
    echo "$first" | grep -Eq "^sparkrun: rank $victim( |:|\))" ||
      { cat "$out"; fail "$transport seed $seed: the first report does not name the dead rank $victim"; }
    echo "$first" | grep -Eq "signal 9|SIGKILL|Killed|killed" ||
      { cat "$out"; fail "$transport seed $seed: the first report does not say the rank was killed"; }
    sleep 0.1
    left=$(leftovers "$marker")
    [ -z "$left" ] || { ps -o pid,stat,args -p $left; fail "$transport seed $seed: processes of the job remain"; }
  done
done
echo PASS
