#!/usr/bin/env bash
# --max-restarts (docs/launcher.md, "Restarting a failed job"): a failed group is started again
# as a whole, each attempt a new job, with nothing of the previous attempt left when the next
# starts (every rank checks: no process of an earlier attempt, none of its /dev/shm segments,
# one job dir in TMPDIR: its own). Not restarted: success, --timeout, a start failure, a stop
# asked by the user (during an attempt or during the back-off).
#   restarts.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
work=$(mktemp -d /tmp/spark-restarts.XXXXXX)
sp_pid=
cleanup() {
  [ -n "$sp_pid" ] && kill -9 "$sp_pid" 2>/dev/null
  pkill -9 -f -- "rstr$$x" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The rank: logs "RANK COUNT PID JOB TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS",
# checks that nothing of an earlier attempt remains, then acts by MODE:
#   fail_until N  rank 1 exits 3 while SPARK_RESTART_COUNT < N, the others wait; then exit 0
#   hold_first    attempt 0 waits (to be killed or stopped); later attempts exit 0
#   stream_first  attempt 0: FAULT_STREAM kill 1 (rank 1 SIGKILLs itself mid-stream, the others
#                 fail-stop abort); later attempts: FAULT_STREAM healthy 20
#   ok            exit 0
cat >"$work/rank.sh" <<'EOF'
mode=$1 n=$2 prog=$3 marker=$4
c=$SPARK_RESTART_COUNT
echo "count $c"
echo "$SPARK_RANK $c $$ $SPARK_JOB_ID ${TORCHELASTIC_RESTART_COUNT:-} ${TORCHELASTIC_MAX_RESTARTS:-}" >>"$W/log"
if [ "$c" -gt 0 ]; then
  for p in $(awk -v c="$c" '$2 < c {print $3}' "$W/log"); do
    kill -0 "$p" 2>/dev/null && echo "attempt $c: pid $p of an earlier attempt is alive" >>"$W/bad"
  done
  for j in $(awk -v c="$c" '$2 < c {print $4}' "$W/log" | sort -u); do
    san=$(printf '%s' "$j" | tr -c 'A-Za-z0-9-' '_' | cut -c1-40)
    ls /dev/shm | grep -qF -- "spark-$san-" &&
      echo "attempt $c: /dev/shm segments of earlier job $j remain" >>"$W/bad"
  done
  dirs=$(ls -d "$TMPDIR"/sparkrun.* 2>/dev/null | wc -l)
  [ "$dirs" -eq 1 ] || echo "attempt $c: $dirs job dirs in TMPDIR" >>"$W/bad"
fi
all_in() {  # until every rank of this attempt has logged (10 s)
  i=0
  while [ "$(awk -v c="$c" '$2 == c' "$W/log" | wc -l)" -lt "$SPARK_SIZE" ] && [ $i -lt 500 ]; do
    sleep 0.02
    i=$((i + 1))
  done
}
case $mode in
fail_until)
  [ "$c" -ge "$n" ] && exit 0
  [ "$SPARK_RANK" = 1 ] && all_in && exit 3
  exec sleep 60 ;;
hold_first)
  [ "$c" -ge 1 ] && exit 0
  exec sleep 60 ;;
stream_first)
  [ "$c" -ge 1 ] && exec "$prog" healthy 20 "$marker"
  exec "$prog" kill 1 "$marker" ;;
ok) exit 0 ;;
esac
EOF

# start CASE NP MODE N SPARKRUN-OPTIONS... : sparkrun in the background (sp_pid), bounded.
start() {
  local name=$1 np=$2 mode=$3 n=$4
  shift 4
  W=$work/$name
  marker="rstr$$x$name"
  mkdir -p "$W/tmp"
  : >"$W/log"
  export W
  TMPDIR=$W/tmp timeout 60 "$sparkrun" -n "$np" --kill-grace 0.5 "$@" \
    sh "$work/rank.sh" "$mode" "$n" "$prog" "$marker" >"$W/out" 2>"$W/err" &
  sp_pid=$!
}
finish() {  # waits for sparkrun: rc
  wait "$sp_pid"
  rc=$?
  sp_pid=
  sed "s/^/  [$(basename "$W")] /" "$W/err"
  [ ! -s "$W/bad" ] || fail "$(basename "$W"): $(cat "$W/bad")"
  [ -z "$(leftovers "$marker")" ] || fail "$(basename "$W"): processes of the job remain"
  [ -z "$(ls -A "$W/tmp")" ] || fail "$(basename "$W"): the job dir remains: $(ls "$W/tmp")"
}
wait_log() {  # LINES: until the log has that many lines (10 s)
  local i
  for i in $(seq 1 200); do
    [ "$(wc -l <"$W/log")" -ge "$1" ] && return 0
    sleep 0.05
  done
  fail "$(basename "$W"): the ranks did not start"
}
counts() { awk '{print $2}' "$W/log" | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}'; }

# 1. Fails on attempts 0 and 1, succeeds on 2: exit 0, both reports with their attempt numbers,
#    every rank in every attempt, each attempt a new job; torchrun's variables set.
t0=$(now_ms)
start twice 3 fail_until 2 --max-restarts 2 --restart-backoff 0
finish
ms=$(($(now_ms) - t0))
[ "$rc" -eq 0 ] || fail "twice: exit $rc, want 0"
for a in 1 2; do
  grep -qE "^sparkrun: attempt $a of 3 failed: rank 1 \(pid [0-9]+\) exited with status 3; restarting in 0 s$" "$W/err" ||
    fail "twice: no report of attempt $a"
done
grep -qx "sparkrun: attempt 3 of 3 succeeded" "$W/err" || fail "twice: no line for the last attempt"
[ "$(counts)" = "0:3 1:3 2:3 " ] || fail "twice: attempts per count: $(counts)"
[ "$(awk '{print $4}' "$W/log" | sort -u | wc -l)" -eq 3 ] || fail "twice: not 3 distinct job ids"
awk '$2 != $5 || $6 != 2 {exit 1}' "$W/log" || fail "twice: TORCHELASTIC_* variables wrong"
echo "three attempts of 3 ranks (two restarts, back-off 0) in $ms ms"

# 1b. --output-dir keeps every attempt's output: DIR/attempt.K/rank.N.
start output_dir 2 fail_until 1 --max-restarts 1 --restart-backoff 0 --output-dir "$work/outdir"
finish
[ "$rc" -eq 0 ] || fail "output_dir: exit $rc, want 0"
for a in 0 1; do
  for r in 0 1; do
    f=$work/outdir/attempt.$a/rank.$r/stdout
    [ "$(cat "$f" 2>/dev/null)" = "count $a" ] || fail "output_dir: $f does not hold attempt $a's output"
  done
done
[ ! -e "$work/outdir/rank.0" ] || fail "output_dir: rank.0 outside the attempt dirs"

# 2. The same under --max-restarts 1: exit 3 after 2 attempts.
start out_of_restarts 3 fail_until 2 --max-restarts 1 --restart-backoff 0
finish
[ "$rc" -eq 3 ] || fail "out_of_restarts: exit $rc, want 3"
grep -qE "^sparkrun: attempt 2 of 2 failed: rank 1 \(pid [0-9]+\) exited with status 3; no restarts left \(--max-restarts 1\)$" "$W/err" ||
  fail "out_of_restarts: no final report"
[ "$(counts)" = "0:3 1:3 " ] || fail "out_of_restarts: attempts per count: $(counts)"

# 3. kill -9 of one rank: the whole group again (every rank's count goes up together), no
#    survivor of attempt 0 (checked by each rank of attempt 1).
start kill9 3 hold_first 0 --max-restarts 1 --restart-backoff 0.1
wait_log 3
victim=$(awk '$1 == 1 {print $3}' "$W/log")
kill -9 "$victim"
finish
[ "$rc" -eq 0 ] || fail "kill9: exit $rc, want 0"
grep -qE "^sparkrun: attempt 1 of 2 failed: rank 1 \(pid $victim\) was killed by signal 9 .*; restarting in 0.1 s$" "$W/err" ||
  fail "kill9: no report naming the killed rank"
[ "$(counts)" = "0:3 1:3 " ] || fail "kill9: attempts per count: $(counts)"

# 4. A fail-stop abort mid-stream (rank 1 dies, the others' records abort the group): restarted,
#    and the second attempt's collectives work.
start failstop 3 stream_first 0 --max-restarts 1 --restart-backoff 0
finish
[ "$rc" -eq 0 ] || fail "failstop: exit $rc, want 0"
grep -qE "^sparkrun: attempt 1 of 2 failed: .*; restarting in 0 s$" "$W/err" || fail "failstop: no report"
[ "$(counts)" = "0:3 1:3 " ] || fail "failstop: attempts per count: $(counts)"

# 5. SIGTERM to sparkrun during the back-off: stops at once, exit 143, no next attempt.
start backoff_term 2 fail_until 9 --max-restarts 3 --restart-backoff 30
for i in $(seq 1 200); do grep -q "restarting in 30 s" "$W/err" && break; sleep 0.05; done
grep -q "restarting in 30 s" "$W/err" || fail "backoff_term: no back-off line"
t0=$(now_ms)
kill -TERM "$sp_pid"
finish
ms=$(($(now_ms) - t0))
[ "$rc" -eq 143 ] || fail "backoff_term: exit $rc, want 143"
[ "$ms" -lt 3000 ] || fail "backoff_term: took $ms ms to stop"
grep -qx "sparkrun: SIGTERM during the restart back-off: not restarting" "$W/err" ||
  fail "backoff_term: no line"
[ "$(counts)" = "0:2 " ] || fail "backoff_term: attempts per count: $(counts)"
echo "SIGTERM during the back-off: sparkrun ended after $ms ms"

# 6. SIGTERM to sparkrun during an attempt: the group stops, no restart.
start attempt_term 2 hold_first 0 --max-restarts 3 --restart-backoff 0
wait_log 2
kill -TERM "$sp_pid"
finish
[ "$rc" -eq 143 ] || fail "attempt_term: exit $rc, want 143"
grep -qx "sparkrun: attempt 1 of 4 stopped by SIGTERM: not restarting" "$W/err" ||
  fail "attempt_term: no line"
[ "$(counts)" = "0:2 " ] || fail "attempt_term: attempts per count: $(counts)"

# 6b. SIGKILL to sparkrun during an attempt: the attempt's launcher gets SIGTERM (PDEATHSIG) and
#     stops its ranks; nothing of the job is left and no attempt follows.
start sparkrun_killed 2 hold_first 0 --max-restarts 3 --restart-backoff 0
wait_log 2
kill -9 "$(pgrep -P "$sp_pid" -x sparkrun)"  # sp_pid is timeout's: it reports 137
for i in $(seq 1 100); do
  [ -z "$(leftovers "$marker")" ] && [ -z "$(ls -A "$W/tmp")" ] && break
  sleep 0.05
done
finish
[ "$rc" -eq 137 ] || fail "sparkrun_killed: exit $rc, want 137"
[ "$(counts)" = "0:2 " ] || fail "sparkrun_killed: attempts per count: $(counts)"

# 7. Success is never restarted (and says nothing).
start success 2 ok 0 --max-restarts 3
finish
[ "$rc" -eq 0 ] || fail "success: exit $rc"
[ "$(counts)" = "0:2 " ] || fail "success: attempts per count: $(counts)"
[ ! -s "$W/err" ] || fail "success: sparkrun printed something"

# 8. --timeout is not restarted.
start timeout 2 hold_first 0 --max-restarts 3 --timeout 0.5
finish
[ "$rc" -eq 124 ] || fail "timeout: exit $rc, want 124"
grep -q "^sparkrun: attempt 1 of 4 failed: .*; not restarting: --timeout expired$" "$W/err" ||
  fail "timeout: no line"
[ "$(counts)" = "0:2 " ] || fail "timeout: attempts per count: $(counts)"

# 9. A start failure is not retried: a name PATH does not have (refused before any attempt), a
#    missing path and a program whose interpreter is missing (the exec fails in the attempt).
W=$work/nosuch
mkdir -p "$W"
printf '#!/nonexistent/interpreter\n' >"$W/badinterp"
chmod +x "$W/badinterp"
for cmd in "nosuch-rstr$$" "$W/nosuch" "$W/badinterp"; do
  timeout 30 "$sparkrun" -n 2 --max-restarts 3 "$cmd" >"$W/out" 2>"$W/err"
  rc=$?
  cat "$W/err"
  [ "$rc" -eq 127 ] || fail "$cmd: exit $rc, want 127"
  [ "$(grep -c '^sparkrun: cannot start' "$W/err")" -eq 1 ] || fail "$cmd: not one start failure"
  grep -q "attempt 2" "$W/err" && fail "$cmd: restarted"
  case $cmd in
  */*) grep -q "^sparkrun: attempt 1 of 4 failed: cannot start rank .*; not restarting: a rank's program could not be started (restarting cannot help" "$W/err" ||
    fail "$cmd: no line saying why it is not restarted" ;;
  esac
done

# 10. Bad values are usage errors.
"$sparkrun" -n 1 --max-restarts -1 true 2>/dev/null
[ $? -eq 2 ] || fail "--max-restarts -1 accepted"
"$sparkrun" -n 1 --restart-backoff x true 2>/dev/null
[ $? -eq 2 ] || fail "--restart-backoff x accepted"
echo PASS
