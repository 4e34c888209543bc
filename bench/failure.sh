#!/usr/bin/env bash
# Fail-stop timings through sparkrun (never part of the test run; figures in docs/fail-stop.md).
#   bench/failure.sh [--json FILE] [--variant quiet|loaded] [BUILD_DIR] [REPS] [TRANSPORT[,TRANSPORT]]
# --json FILE also writes the target rows as one result set for bench/report (bench/README.md),
# e.g. bench/failure.sh --json bench/results/failure-quiet.json build 3 shm,tcp
# 1. death -> exit: 3 ranks stream verified allreduces; one rank gets kill -9 from outside;
#    time until sparkrun exits (--kill-grace 0 and 1: goal < 100 ms + the grace).
# 2. SIGSTOP -> records: SPARKNET_ROCE_TIMEOUT_MS=300; one rank gets SIGSTOP; time until
#    each survivor's record line reaches sparkrun's output (goal: timeout + at most 5 %),
#    and the waited_ms each record states.
# 3. a late peer: 2 ranks, rank 1 comes 2 s late after 200 allreduces; the CPU time rank 0's
#    process uses while it waits (issue 17: < 0.1 s).
# Rows 2 and 3 end with their issue-17 target and met / NOT met.
set -u
json= variant=quiet cmdline="bench/failure.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    *) break ;;
  esac
done
build=${1:-build} reps=${2:-10} transports=${3:-shm}
rows=$(mktemp)
row() {  # WHAT UNIT OURS OP VALUE: one JSON row with an absolute target
  printf '{"what": "%s", "unit": "%s", "ours": %s, "target": {"op": "%s", "value": %s}}\n' "$@" >>"$rows"
}
sparkrun=$build/launcher/sparkrun prog=$build/tests/fault/fault_stream
[ -x "$sparkrun" ] && [ -x "$prog" ] || { echo "build sparkrun and fault_stream first ($build)"; exit 2; }
now_ns() { date +%s%N; }
stats() {  # prints min median max of the numbers on stdin
  sort -n | awk '{a[NR]=$1} END {if (NR) printf "min %s  median %s  max %s  (n=%d)\n", a[1], a[int((NR+1)/2)], a[NR], NR}'
}
wait_ranks() {  # MARKER -> the pids of the 3 ranks once they are all up
  local i pids
  for i in $(seq 1 200); do
    pids=$(pgrep -f -- "$1" | grep -v "^$$\$" | xargs -r ps -o pid=,comm= -p | awk '$2=="fault_stream"{print $1}')
    [ "$(echo "$pids" | grep -c .)" -ge 3 ] && { echo "$pids"; return; }
    sleep 0.02
  done
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "null"}'; }
worst() { sort -n | tail -1 | awk '{print} END {if (!NR) print "null"}'; }
for transport in ${transports//,/ }; do
export SPARK_TRANSPORT=$transport
for grace in 0 1; do
  : >/tmp/failure_bench.$$
  for r in $(seq 1 "$reps"); do
    marker="fbk$$x$grace$r"
    "$sparkrun" -n 3 --kill-grace $grace "$prog" healthy 100000000 "$marker" >/dev/null 2>&1 &
    job=$!
    pids=$(wait_ranks "$marker"); sleep 0.3
    victim=$(echo "$pids" | sed -n 2p)
    t0=$(now_ns); kill -9 "$victim"; wait $job; t1=$(now_ns)
    echo $(( (t1 - t0) / 1000000 )) >>/tmp/failure_bench.$$
  done
  echo "death -> sparkrun exit, --kill-grace $grace ($transport), ms: $(stats </tmp/failure_bench.$$)"
  [ "$grace" = 0 ] && row "death -> sparkrun exit, --kill-grace 0, median ($transport)" ms "$(median </tmp/failure_bench.$$)" "<" 100
done
: >/tmp/failure_bench.$$; : >/tmp/failure_bench_w.$$
for r in $(seq 1 "$reps"); do
  marker="fbs$$x$r"
  fifo=/tmp/failure_bench_fifo.$$; rm -f $fifo; mkfifo $fifo
  SPARKNET_ROCE_TIMEOUT_MS=300 "$sparkrun" -n 3 --kill-grace 2 "$prog" healthy 100000000 "$marker" >$fifo 2>&1 &
  job=$!
  # Time-stamp each output line as it arrives.
  (while IFS= read -r line; do echo "$(date +%s%N) $line"; done <$fifo) >/tmp/failure_bench_lines.$$ &
  reader=$!
  pids=$(wait_ranks "$marker"); sleep 0.3
  victim=$(echo "$pids" | sed -n 2p)
  t0=$(now_ns); kill -STOP "$victim"
  wait $job; wait $reader
  grep ' sparkrun: rank [0-9]* aborted: .*: no data from rank ' /tmp/failure_bench_lines.$$ | while read -r ts rest; do
    echo $(( (ts - t0) / 1000000 )) >>/tmp/failure_bench.$$
    echo "$rest" | sed -E 's/.* after ([0-9]+) ms .*/\1/' >>/tmp/failure_bench_w.$$
  done
  rm -f $fifo
done
echo "SIGSTOP -> survivor's record line at sparkrun, timeout 300 ms ($transport), ms: $(stats </tmp/failure_bench.$$)"
echo "waited_ms in the records (goal 300..315): $(stats </tmp/failure_bench_w.$$)"
within=$(awk '$1<=315' /tmp/failure_bench_w.$$ | wc -l) all=$(wc -l </tmp/failure_bench_w.$$)
verdict() { [ "$1" = yes ] && echo met || echo "NOT met"; }
echo "fail-stop: SIGSTOP -> record within timeout + 5 % ($transport): $within of $all records: $(verdict "$([ "$all" -gt 0 ] && [ "$within" = "$all" ] && echo yes)")"
row "SIGSTOP -> record, worst waited_ms of $all records, timeout 300 ms ($transport)" ms "$(worst </tmp/failure_bench_w.$$)" "<=" 315
: >/tmp/failure_bench.$$
for r in $(seq 1 "$reps"); do
  "$sparkrun" -n 2 "$prog" late 2000 >/tmp/failure_bench_lines.$$ 2>&1
  sed -nE 's/^LATE_WAIT rank 0 wall_ms [0-9.]+ cpu_ms ([0-9.]+)$/\1/p' /tmp/failure_bench_lines.$$ >>/tmp/failure_bench.$$
done
worst=$(sort -n /tmp/failure_bench.$$ | tail -1)
echo "a 2 s wait for a late peer, CPU ms of the waiting rank ($transport): $(stats </tmp/failure_bench.$$); target < 100 ms: $(verdict "$(awk -v w="${worst:-1e9}" 'BEGIN { print (w < 100) ? "yes" : "no" }')")"
row "CPU time of a 2 s wait for a late peer, worst of $reps ($transport)" ms "${worst:-null}" "<" 100
done
rm -f /tmp/failure_bench.$$ /tmp/failure_bench_w.$$ /tmp/failure_bench_lines.$$
if [ -n "$json" ]; then
  python3 "$(dirname "$0")/results.py" write "$json" --bench failure --variant "$variant" --command "$cmdline" <"$rows"
fi
rm -f "$rows"
