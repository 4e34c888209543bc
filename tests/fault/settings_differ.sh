#!/usr/bin/env bash
# A setting every rank must share, different on one rank (issue 23): the job ends within
# seconds, not at a barrier timeout, with one line naming the setting, its values and the
# ranks; agreeing values still run. One rank gets its value from a wrapper, as a host with
# its own environment would (docs/configuration.md, "Settings every rank must share").
#   settings_differ.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../lib/free_port.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# differ N RANK VAR=VALUE EXPECTED_LINE [sparkrun options...]: rank RANK alone gets VAR=VALUE.
differ() {
  local n=$1 rank=$2 assign=$3 want=$4
  shift 4
  local wrapper="if [ \"\$SPARK_RANK\" = $rank ]; then export $assign; fi; exec \"\$0\" \"\$@\""
  local t0; t0=$(now_ms)
  timeout 60 "$sparkrun" -n "$n" "$@" sh -c "$wrapper" "$prog" healthy 3 >"$out" 2>&1
  local rc=$? took=$(( $(now_ms) - t0 ))
  echo "--- -n $n, rank $rank: $assign $*: exit $rc after $took ms"; cat "$out"
  [ "$rc" -ne 0 ] || fail "$assign on rank $rank: the job exited 0"
  [ "$rc" -ne 124 ] || fail "$assign on rank $rank: the job hung"
  [ "$took" -lt 15000 ] || fail "$assign on rank $rank: the job took $took ms (a timeout, not the check)"
  # "sparkrun: [host H: ]rank 0 aborted: LINE" (multi-host jobs name the host)
  local got; got=$(grep -F -- "rank 0 aborted: $want" "$out" | grep -c "^sparkrun: ")
  [ "$got" -eq 1 ] || fail "$assign on rank $rank: the line appears $got times, expected once: $want"
  grep -q COMPLETED "$out" && fail "$assign on rank $rank: a rank ran its collectives"
  grep -Eq ": TIMEOUT|no data from|has not published|timed out" "$out" && fail "$assign on rank $rank: a timeout, not the check"
  return 0
}
differ 3 1 SPARK_TCP_LANES=4 \
  "settings differ between ranks: SPARK_TCP_LANES=4 on rank 1, 2 on ranks 0,2 (give every rank the same value, e.g. with -x SPARK_TCP_LANES=4)" \
  -x SPARK_TRANSPORT=tcp
differ 2 1 SPARK_TRANSPORT=tcp \
  "settings differ between ranks: SPARK_TRANSPORT=auto on rank 0, tcp on rank 1 (give every rank the same value, e.g. with -x SPARK_TRANSPORT=tcp)"
differ 3 2 SPARKNET_ROCE_TIMEOUT_MS=2000 \
  "settings differ between ranks: SPARKNET_ROCE_TIMEOUT_MS=2000 on rank 2, 10000 on ranks 0,1 (give every rank the same value, e.g. with -x SPARKNET_ROCE_TIMEOUT_MS=2000)"

# SPARK_ON_FAILURE=raise: every rank throws the same spark::ConfigError from init.
wrapper='if [ "$SPARK_RANK" = 1 ]; then export SPARK_TCP_LANES=3; fi; exec "$0" "$@"'
SPARK_ON_FAILURE=raise SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 2 sh -c "$wrapper" "$prog" healthy 3 >"$out" 2>&1
rc=$?
echo "--- raise: exit $rc"; cat "$out"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "raise: exit $rc"
n=$(grep -c "settings differ between ranks: SPARK_TCP_LANES=2 on rank 0, 3 on rank 1 (give every rank the same value, e.g. with -x SPARK_TCP_LANES=3)" "$out")
[ "$n" -eq 2 ] || fail "raise: $n ranks reported the difference, expected both"

# Without a launcher (the environment rendezvous): rank 0 reports, rank 1 fails at once too.
port=$(free_port) || fail "no free TCP port for the environment rendezvous"
t0=$(now_ms)
env -u PMIX_RANK SPARK_RANK=0 SPARK_SIZE=2 SPARK_RENDEZVOUS=127.0.0.1:$port SPARK_TRANSPORT=tcp \
  timeout 60 "$prog" healthy 3 >"$out.0" 2>&1 &
p0=$!
env -u PMIX_RANK SPARK_RANK=1 SPARK_SIZE=2 SPARK_RENDEZVOUS=127.0.0.1:$port SPARK_TRANSPORT=tcp \
  SPARK_TCP_LANES=5 timeout 60 "$prog" healthy 3 >"$out.1" 2>&1
rc1=$?
wait $p0
rc0=$? took=$(( $(now_ms) - t0 ))
echo "--- env rendezvous: exit $rc0 / $rc1 after $took ms"; cat "$out.0" "$out.1"
rm -f "$out.0" "$out.1"
[ "$rc0" -ne 0 ] && [ "$rc0" -ne 124 ] && [ "$rc1" -ne 0 ] && [ "$rc1" -ne 124 ] ||
  fail "env rendezvous: exits $rc0 / $rc1"
[ "$took" -lt 15000 ] || fail "env rendezvous: took $took ms"

# Agreeing values (every rank the same, also a non-default one) run as before.
for assign in SPARK_TCP_LANES=4 SPARKNET_ROCE_TIMEOUT_MS=2000; do
  env "$assign" SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 3 "$prog" healthy 3 >"$out" 2>&1 ||
    { cat "$out"; fail "$assign on every rank: exit $?"; }
  grep -q "settings differ" "$out" && fail "$assign on every rank: reported as a difference"
done
echo PASS
