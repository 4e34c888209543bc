#!/usr/bin/env bash
# Soak (docs/reliability.md): JOBS jobs of 3 ranks, CONCURRENT at a time on this host, each
# with a random transport (shm, tcp) and a random end: clean, a rank SIGKILLed, a rank
# SIGSTOPped (fail-stop records, then the abort), sparkrun SIGKILLed, SIGINT or SIGTERM, at a
# random moment. Each job's exit status and first report must be the documented one; at the
# end no process, shm segment or job-directory entry of any job may remain, and this
# script's own fds are as many as at the start. Prints the counts.
#   soak.sh SPARKRUN FAULT_STREAM [JOBS] [CONCURRENT] [SEED]
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2 jobs=${3:-24} conc=${4:-3} seed=${5:-$$}
work=$(mktemp -d /tmp/spark-soak.XXXXXX)
tag="soak$$x"
cleanup() {
  pkill -9 -f -- "$tag" 2>/dev/null
  local j san
  for j in "$work"/job.*/job; do
    [ -f "$j" ] || continue
    san=$(printf '%s' "$(cat "$j")" | tr -c 'A-Za-z0-9-' '_' | cut -c1-40)
    rm -f /dev/shm/spark-"$san"-*
  done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/tmp"
fds_before=$(ls /proc/$$/fd | wc -l)
wrapper='echo "$SPARK_JOB_ID" >"$W/job"; echo $$ >"$W/pid.$SPARK_RANK"; exec "$0" "$@"'
ends=(clean kill_rank stop_rank kill_sparkrun int_sparkrun term_sparkrun)

one_job() {  # INDEX -> appends "INDEX END TRANSPORT EXIT VERDICT" to $work/results
  local i=$1 r end transport rc verdict="ok" delay victim
  RANDOM=$((seed + i * 7919))
  end=${ends[$((RANDOM % ${#ends[@]}))]}
  transport=tcp
  [ $((RANDOM % 2)) = 0 ] && transport=shm
  delay=$(printf '0.%03d' $((RANDOM % 800)))
  victim=$((RANDOM % 3))
  export W=$work/job.$i
  mkdir -p "$W"
  local n=1000000
  [ "$end" = clean ] && n=20
  local stop_args=(healthy "$n")
  # A rank stopped during wire-up is waited for SPARK_JOIN_TIMEOUT_MS, at init's closing
  # barrier SPARK_BARRIER_TIMEOUT_MS (10 min by default), after it SPARKNET_ROCE_TIMEOUT_MS.
  TMPDIR=$work/tmp SPARK_TRANSPORT=$transport SPARKNET_ROCE_TIMEOUT_MS=300 \
    SPARK_JOIN_TIMEOUT_MS=5000 SPARK_BARRIER_TIMEOUT_MS=5000 \
    "$sparkrun" -n 3 --timeout 60 --kill-grace 0.5 sh -c "$wrapper" "$prog" "${stop_args[@]}" \
    "$tag$i" >"$W/out" 2>&1 &
  local sp=$!
  if [ "$end" != clean ]; then
    # Up to 30 s: beside the sanitizer suites a job can take that long to start its ranks.
    for r in $(seq 1 1500); do [ -f "$W/pid.$victim" ] && break; sleep 0.02; done
    sleep "$delay"
    case $end in
    kill_rank) kill -9 "$(cat "$W/pid.$victim")" 2>/dev/null ;;
    stop_rank) kill -STOP "$(cat "$W/pid.$victim")" 2>/dev/null ;;
    kill_sparkrun) kill -9 "$sp" ;;
    int_sparkrun) kill -INT "$sp" ;;
    term_sparkrun) kill -TERM "$sp" ;;
    esac
  fi
  wait "$sp" 2>/dev/null
  rc=$?
  local first
  first=$(grep -v "^sparkrun: note:" "$W/out" | grep -m1 "^sparkrun: ")
  case $end in
  clean) [ "$rc" = 0 ] || verdict="exit $rc, expected 0" ;;
  kill_rank)
    [ "$rc" = 137 ] || verdict="exit $rc, expected 137"
    echo "$first" | grep -Eq "^sparkrun: rank $victim .*(signal 9|SIGKILL)" || verdict="first report: $first" ;;
  stop_rank)
    [ "$rc" = 1 ] || verdict="exit $rc, expected 1"
    # After wire-up the survivors' records name it; stopped inside wire-up, the ranks' PMIx
    # fence times out (SPARK_JOIN_TIMEOUT_MS) without a name (docs/reliability.md).
    # A survivor waiting on another survivor that the stopped rank holds up can time out
    # first and end the job before any record names the stopped rank (seen once in ~50
    # stopped ranks at load 16, 9 ranks on 2 cores: rank 1 gave up on rank 2 at seq 24, rank 2
    # was at seq 25 waiting for stopped rank 0): then the first record is still a timeout.
    # Stopped inside its PMIx handshake, it holds the PMIx server: the others' bounded waits
    # on the server end the job (docs/reliability.md, "A held PMIx server").
    grep -Eq "rank $victim|fence timed out after 5000 ms|did not answer this rank's handshake" "$W/out" ||
      grep -Eq "^sparkrun: rank [0-9] aborted: rank [0-9]: .*: no data from rank [0-9] .*\(timeout 300 ms\)$" "$W/out" ||
      verdict="no report names the stopped rank $victim" ;;
  kill_sparkrun) [ "$rc" = 137 ] || verdict="exit $rc, expected 137" ;;
  int_sparkrun) [ "$rc" = 130 ] || verdict="exit $rc, expected 130" ;;
  term_sparkrun) [ "$rc" = 143 ] || verdict="exit $rc, expected 143" ;;
  esac
  # A job that ended before the signal came (possible for the shortest delays) is clean.
  if [ "$verdict" != ok ] && [ "$rc" = 0 ] && grep -q COMPLETED "$W/out"; then verdict=ok; fi
  echo "$i $end $transport $rc $verdict" >>"$work/results"
  [ "$verdict" = ok ] || { echo "--- job $i ($end $transport): $verdict"; cat "$W/out"; }
}

worker() {  # FIRST STEP
  local i
  for ((i = $1; i < jobs; i += $2)); do one_job "$i"; done
}
start=$SECONDS
for ((w = 0; w < conc; w++)); do worker "$w" "$conc" & done
wait
# The watcher of a SIGKILLed sparkrun acts after it is gone: give the last ones a moment.
for r in $(seq 1 100); do [ -z "$(leftovers "$tag")" ] && break; sleep 0.05; done
procs=$(leftovers "$tag" | wc -l)
segs=0
for j in "$work"/job.*/job; do
  [ -f "$j" ] || continue
  san=$(printf '%s' "$(cat "$j")" | tr -c 'A-Za-z0-9-' '_' | cut -c1-40)
  segs=$((segs + $(ls /dev/shm | grep -cF -- "spark-$san-")))
done
dirs=$(find "$work/tmp" -mindepth 1 | wc -l)
fds_after=$(ls /proc/$$/fd | wc -l)
bad=$(awk '$5 != "ok"' "$work/results" | wc -l)
echo "soak: $(wc -l <"$work/results") jobs ($conc at a time, seed $seed) in $((SECONDS - start)) s"
for e in "${ends[@]}"; do
  for t in shm tcp; do
    printf '  %-14s %s: %3d jobs\n' "$e" "$t" "$(awk -v e="$e" -v t="$t" '$2==e && $3==t' "$work/results" | wc -l)"
  done
done
echo "soak: wrong exit or report: $bad; leftovers: $procs processes, $segs shm segments, $dirs job-dir entries, $((fds_after - fds_before)) fds"
[ "$bad" = 0 ] || fail "$bad jobs ended with a wrong status or report"
[ "$procs" = 0 ] && [ "$segs" = 0 ] && [ "$dirs" = 0 ] && [ "$fds_after" = "$fds_before" ] ||
  fail "something was left behind"
echo PASS
