#!/usr/bin/env bash
# Nothing left behind (docs/reliability.md): a job of 3 ranks ends at each stage in turn
# (clean; a rank SIGKILLed during wire-up, after it, SIGSTOPped then aborted; sparkrun
# SIGKILLed during wire-up and mid-stream; sparkrun interrupted), over shm and tcp. After
# each, the job's footprint must be empty: no process of the job (marker), no shm segment of
# the job in /dev/shm (its SPARK_JOB_ID), and nothing in the job's TMPDIR (job directory,
# PMIx socket files).
#   leftovers.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
work=$(mktemp -d /tmp/spark-leftovers.XXXXXX)
sp_pid=
cleanup() {
  [ -n "$sp_pid" ] && kill -9 "$sp_pid" 2>/dev/null
  pkill -9 -f -- "lftv$$x" 2>/dev/null
  local j
  for j in "$work"/*/job; do  # a failed case leaves its segments: not on this machine
    [ -f "$j" ] && segments "$(cat "$j")" | sed 's|^|/dev/shm/|' | xargs -r rm -f
  done
  rm -rf "$work"
}
trap cleanup EXIT

# The rank wrapper records the job id and its pid (fault_stream keeps the pid: exec).
wrapper='echo "$SPARK_JOB_ID" >"$W/job"; echo $$ >"$W/pid.$SPARK_RANK"; exec "$0" "$@"'

segments() {  # JOB_ID -> the job's /dev/shm segments
  local san
  san=$(printf '%s' "$1" | tr -c 'A-Za-z0-9-' '_' | cut -c1-40)
  ls /dev/shm 2>/dev/null | grep -F -- "spark-$san-" || true
}
wait_for() {  # COND_CMD... : polls up to 10 s
  local i
  for i in $(seq 1 200); do "$@" && return 0; sleep 0.05; done
  return 1
}
have_pids() { [ -f "$W/pid.0" ] && [ -f "$W/pid.1" ] && [ -f "$W/pid.2" ] && [ -f "$W/job" ]; }
# Waits (busy, builtins only: the window is milliseconds) until rank 0's shm segment exists,
# i.e. rank 0 is inside wire-up: it created its segment and unlinks it only once every rank
# attached. Prints the segment's path.
rank0_segment() {
  local job= san f end=$((SECONDS + 20))
  while [ -z "$job" ] && [ $SECONDS -lt $end ]; do
    [ -s "$W/job" ] && read -r job <"$W/job"
  done
  san=${job//[^A-Za-z0-9-]/_}
  san=${san:0:40}
  while [ $SECONDS -lt $end ]; do
    for f in /dev/shm/spark-"$san"-*-r0-*; do
      [ -e "$f" ] && { echo "$f"; return 0; }
    done
  done
  return 1
}
gone() { [ -z "$(leftovers "$marker")" ]; }

checked=0 in_window=0 starved=0
run_case() {  # NAME TRANSPORT ACTION ARGS... (ACTION: none|kill_rank_wireup|...)
  local name=$1 transport=$2 action=$3
  hit=1
  shift 3
  W=$work/$name.$transport
  marker="lftv$$x$name$transport"
  mkdir -p "$W/tmp"
  export W
  # nice: the ranks yield to this script's poll, which must see the milliseconds of wire-up.
  TMPDIR=$W/tmp SPARK_TRANSPORT=$transport SPARKNET_ROCE_TIMEOUT_MS=300 \
    nice -n 15 "$sparkrun" -n 3 --timeout 60 --kill-grace 0.5 sh -c "$wrapper" "$prog" "$@" "$marker" \
    >"$W/out" 2>&1 &
  sp_pid=$!
  case $action in
  none | abort) ;;
  kill_rank_wireup | kill_sparkrun_wireup)
    local seg= victim starved_now=0
    if [ "$transport" = shm ]; then
      # Starved: rank 0 had not even started (no pid file) when the 20 s ran out. A rank 0
      # that runs and shows no segment is a miss like any other, so the final check still
      # fails if segments stop appearing.
      seg=$(rank0_segment) || { seg=none; [ -f "$W/pid.0" ] || starved_now=1; }
      [ "$starved_now" = 0 ] || starved=1
    else
      wait_for have_pids
    fi
    # No segment seen in 20 s (e.g. a starved job: its ranks run at nice 15 beside other
    # tests): the window is missed anyway, so kill once the ranks are up, as over tcp.
    [ "$seg" != none ] || wait_for have_pids || true
    victim=$sp_pid
    # Rank 0 still without its pid file: end the job through sparkrun, so the case ends and is
    # checked for leftovers instead of running its long stream into --timeout.
    [ "$action" = kill_rank_wireup ] && [ -f "$W/pid.0" ] && victim=$(cat "$W/pid.0")
    kill -9 "$victim"
    # Was rank 0 still inside wire-up (its segment linked) when it or sparkrun died?
    if [ -n "$seg" ]; then
      hit=0
      if [ "$starved_now" = 1 ]; then
        echo "$name: rank 0 had not started within 20 s (the job was starved; window not reached)"
      elif [ "$seg" != none ] && [ -e "$seg" ]; then
        hit=1 in_window=$((in_window + 1))
      else
        echo "$name: rank 0 was past wire-up (window missed)"
      fi
    fi ;;
  kill_sparkrun_stream)
    wait_for have_pids; sleep 0.5; kill -9 "$sp_pid" ;;
  interrupt)
    wait_for have_pids; sleep 0.5; kill -INT "$sp_pid" ;;
  esac
  wait "$sp_pid" 2>/dev/null
  local rc=$?
  sp_pid=
  [ "$rc" -ne 124 ] || { cat "$W/out"; fail "$name $transport: the job hung"; }
  # The watcher acts after sparkrun is gone: give it (and the kernel's reaping) a moment.
  wait_for gone || { ps -o pid,stat,args -p $(leftovers "$marker"); fail "$name $transport: processes of the job remain"; }
  local job segs files
  job=$(cat "$W/job" 2>/dev/null)
  [ -n "$job" ] || { cat "$W/out"; fail "$name $transport: no rank started"; }
  no_segments() { [ -z "$(segments "$job")" ]; }
  wait_for no_segments || true  # the strict check follows
  segs=$(segments "$job")
  files=$(cd "$W/tmp" && find . -mindepth 1 | head -20)
  echo "$name $transport: exit $rc, job $job, segments left: $(echo -n "$segs" | grep -c .), files left: $(echo -n "$files" | grep -c .)"
  [ -z "$segs" ] || { cat "$W/out"; fail "$name $transport: shm segments of the job remain: $segs"; }
  [ -z "$files" ] || { cat "$W/out"; fail "$name $transport: the job's TMPDIR is not empty: $files"; }
  case $action in
  none) [ "$rc" -eq 0 ] || { cat "$W/out"; fail "$name $transport: a clean job exited $rc"; } ;;
  *) [ "$rc" -ne 0 ] || [ "$hit" = 0 ] || { cat "$W/out"; fail "$name $transport: exit 0 after a fault"; } ;;
  esac
  rm -rf "$W"
  checked=$((checked + 1))
}

for t in shm tcp; do
  run_case clean "$t" none healthy 5
  # The wire-up window is milliseconds: a kill that came after it is retried (a few times).
  # The stream is long, so that a kill that comes late still lands on a running job: with 5
  # iterations a quiet machine's tcp job ended 56-73 ms after its pid files appeared, and the
  # 50 ms poll could miss it (exit 0 after the "fault"; 2 of 10 passes at -j3).
  for a in 1 2 3 4 5 6; do
    hit=0
    run_case "rank_killed_in_wireup$a" "$t" kill_rank_wireup healthy 1000000
    [ "$hit" = 1 ] || [ "$t" = tcp ] || [ "$starved" = 1 ] && break
  done
  for a in 1 2 3 4 5 6; do
    hit=0
    run_case "sparkrun_killed_in_wireup$a" "$t" kill_sparkrun_wireup healthy 1000000
    [ "$hit" = 1 ] || [ "$t" = tcp ] || [ "$starved" = 1 ] && break
  done
  run_case rank_killed_mid_stream "$t" abort kill 7
  run_case rank_stopped_then_aborted "$t" abort stop 1 5
  run_case sparkrun_killed_mid_stream "$t" kill_sparkrun_stream healthy 1000000
  run_case sparkrun_interrupted "$t" interrupt healthy 1000000
done
echo "$checked jobs ended at every stage, footprint empty after each; $in_window kills hit rank 0 inside wire-up with its shm segment linked"
# A starved job (rank 0 not started in 20 s) says nothing about the window: the test has not
# checked what it claims, so it skips (77) instead of passing; one that raced past the window
# every time is worth a rerun.
if [ "$in_window" -lt 1 ]; then
  [ "$starved" = 1 ] && { echo "SKIP: the wire-up window was not reached: rank 0 had not started within 20 s (the job was starved by other work at nice 15); the footprint of the $checked other jobs was checked"; exit 77; }
  fail "no kill hit the wire-up window (the machine raced through it): rerun"
fi
echo PASS
