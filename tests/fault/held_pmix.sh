#!/usr/bin/env bash
# A held PMIx server (docs/reliability.md): OpenPMIx (4.2 here, 5.0 in debian13.fault) reads a
# client's handshake with a blocking read on its only thread, so one process connected to sparkrun's PMIx server that
# sends nothing (a rank stopped by SIGSTOP while connecting, or a foreign process) holds every
# rank of the job, and the server's own fence timeout never fires. The ranks bound both of
# their waits on the server themselves: the job must end by itself, exit 1, with the reason.
# And a rank stopped before it connects is named by sparkrun when the job fails; and a rank's
# abort (PMIx_Abort) to a held server is bounded too. sparkrun names the holder (held_server.cpp).
#   held_pmix.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
tag="held$$x"
work=$(mktemp -d /tmp/spark-held.XXXXXX)
cleanup() {
  pkill -9 -f -- "$tag" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp"
# Rank 0 connects a silent holder to the server (bash's /dev/tcp, the socket open for 40 s)
# after HOLD_AFTER seconds; then every rank starts its program after START_AFTER seconds.
# Holders keep the tag as their name (exec -a) so that pkill -f and leftovers see them: a
# plain `exec sleep` outlived the test and held CTest's output pipe for the rest of its 40 s.
cat >"$work/rank.sh" <<'EOS'
hold_after=$1 start_after=$2 tag=$3
shift 3
if [ "$SPARK_RANK" = 0 ]; then
  sleep "$hold_after"
  bash -c 'exec 3<>"/dev/tcp/127.0.0.1/${PMIX_SERVER_URI41##*:}"; exec -a "$0" sleep 40' "$tag" &
fi
sleep "$start_after"
exec "$@"
EOS
# ended_by_itself NAME OUT RC TOOK_MS PATTERN: the job failed (exit 1) well before the holder's
# 40 s (join or fail-stop timeout + the 2 s grace on the server's answer, or the 5 s abort wait),
# and its output has a line matching the extended regex PATTERN.
ended_by_itself() {
  local name=$1 out=$2 rc=$3 took=$4 pattern=$5
  echo "--- $name: exit $rc after $took ms"
  cat "$out"
  [ "$rc" = 1 ] || fail "$name: exit $rc, expected 1 (a held PMIx server must end the job)"
  [ "$took" -lt 20000 ] || fail "$name: took $took ms (the wait on the server is not bounded)"
  grep -Eq -- "$pattern" "$out" || fail "$name: no line matches \"$pattern\""
  pkill -9 -f -- "$tag" 2>/dev/null
}
# names_holder NAME OUT: sparkrun said who held its server (the silent holder is a `sleep`).
holder_line="^sparkrun: its PMIx server is held: it waits for a handshake from pid [0-9]+ \\(sleep\\), not a rank of this job"
names_holder() {
  grep -Eq -- "$holder_line" "$2" || fail "$1: sparkrun did not name the process that held its PMIx server"
}
# held_job NAME HOLD_AFTER START_AFTER PATTERN
held_job() {
  local out=$work/$1.out start rc
  start=$(now_ms)
  TMPDIR=$work/tmp SPARK_JOIN_TIMEOUT_MS=3000 timeout 50 "$sparkrun" -n 3 --kill-grace 0.5 \
    bash "$work/rank.sh" "$2" "$3" "$tag" "$prog" healthy 10 "$tag" >"$out" 2>&1
  rc=$?
  ended_by_itself "$1" "$out" "$rc" $(($(now_ms) - start)) "$4"
  names_holder "$1" "$out"
}
# The holder first: every rank's handshake waits for the server.
held_job handshake 0 1 "the PMIx server did not answer this rank's handshake within 5 s"
# The ranks in the fence first (ranks 1 and 2 start at once; rank 0 holds after 2 s).
held_job fence 2 0 "and the PMIx server did not answer for 2000 ms more"
# A rank stopped before it connects: the others' fence times out, and sparkrun names it.
cat >"$work/stopped.sh" <<'EOS'
[ "$SPARK_RANK" = 0 ] && kill -STOP $$
exec "$@"
EOS
out=$work/stopped.out
start=$(now_ms)
TMPDIR=$work/tmp SPARK_JOIN_TIMEOUT_MS=3000 timeout 50 "$sparkrun" -n 3 --kill-grace 0.5 \
  bash "$work/stopped.sh" "$prog" healthy 10 "$tag" >"$out" 2>&1
ended_by_itself stopped "$out" $? $(($(now_ms) - start)) \
  "^sparkrun: rank 0 \(pid [0-9]+\) is stopped \(SIGSTOP"
# Held after wire-up, then a rank stopped: the survivors' records go to PMIx_Abort, which the
# held server never answers; they must leave by themselves and the job end (exit 1).
cat >"$work/late.sh" <<'EOS'
echo $$ >"$W/pid.$SPARK_RANK"
echo "${PMIX_SERVER_URI41##*:}" >"$W/port"
exec "$@"
EOS
export W=$work/late
mkdir -p "$W"
out=$work/late.out
start=$(now_ms)
TMPDIR=$work/tmp SPARKNET_ROCE_TIMEOUT_MS=1000 timeout 50 "$sparkrun" -n 3 --kill-grace 0.5 \
  bash "$work/late.sh" "$prog" healthy 1000000 "$tag" >"$out" 2>&1 &
sp=$!
# Up to 30 s: beside the sanitizer suites a job can take that long to start its ranks.
for r in $(seq 1 600); do [ -f "$W/pid.1" ] && [ -f "$W/port" ] && break; sleep 0.05; done
sleep 2  # wired up: the stream runs
bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"; exec -a "$0" sleep 40' "$tag" "$(cat "$W/port")" &
sleep 0.5
kill -STOP "$(cat "$W/pid.1")"
wait "$sp"
ended_by_itself abort "$out" $? $(($(now_ms) - start)) \
  "the PMIx server did not take the abort within 5000 ms"
names_holder abort "$out"
sleep 0.5
[ -z "$(leftovers "$tag")" ] || fail "processes left: $(leftovers "$tag" | tr '\n' ' ')"
[ -z "$(find "$work/tmp" -mindepth 1)" ] || fail "job directory entries left in TMPDIR"
echo PASS
