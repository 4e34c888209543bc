#!/usr/bin/env bash
# The fault loop of docs/examples/sharded_inference.md: a REQUESTS-request job on 3 ranks
# under sparkrun --max-restarts 30, SPARKNET_ROCE_TIMEOUT_MS=1000; FAULTS times a random rank
# of the running attempt is SIGKILLed or SIGSTOPped (seeded) at a random moment after the
# attempt wrote a result. Then: sparkrun exited 0, the output holds every request exactly
# once, in input order, and its bytes equal an uninterrupted run's; no process is left.
#   sharded_inference_faults.sh SPARKRUN SHARDED_INFERENCE [REQUESTS [FAULTS [SEED]]]
set -u
sparkrun=$1 prog=$2 requests=${3:-2000} faults=${4:-10} seed=${5:-40}
d=$(mktemp -d)
marker=$(basename "$d")
trap 'for p in $(pgrep -f -- "$marker"); do kill -9 "$p" 2>/dev/null; done; rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/tiny_model.sh"
tiny_model "$prog" "$d" "$requests"
opts=(--model "$d/m.safetensors" --input "$d/req.jsonl" --batch 1 --new-tokens 12 --quiet)
t0=$(date +%s%N)
timeout 300 "$sparkrun" -n 3 "$prog" "${opts[@]}" --output "$d/ref.jsonl" 2>"$d/ref.err" ||
  { cat "$d/ref.err"; fail "the uninterrupted run failed"; }
echo "uninterrupted: $(( ($(date +%s%N) - t0) / 1000000 )) ms"

lines() { cat "$d/out.jsonl" 2>/dev/null | wc -l; }
# The ranks of the running attempt: our job's processes named after the program, not stopped.
ranks() {
  local p
  for p in $(pgrep -f -- "$marker"); do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$(basename "$prog" | cut -c1-15)" ] || continue
    [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" = T ] && continue
    echo "$p"
  done
}
RANDOM=$seed
t0=$(date +%s%N)
SPARKNET_ROCE_TIMEOUT_MS=1000 timeout 400 "$sparkrun" -n 3 --max-restarts 30 --restart-backoff 0 \
  --kill-grace 1 "$prog" "${opts[@]}" --output "$d/out.jsonl" 2>"$d/err" &
job=$!
# Faults only while the attempt is inside its batches (every rank is then waiting on the
# others with the 1 s timeout) and not in the last batches (a rank stopped after its last
# collective would keep the others' exit waiting forever).
injected=0 kills=0 stops=0 last=-1
while [ $injected -lt "$faults" ] && kill -0 $job 2>/dev/null; do
  n=$(lines)
  if [ "$n" -le "$last" ] || [ "$n" -eq 0 ]; then sleep 0.02; continue; fi
  mapfile -t pids < <(ranks)
  [ ${#pids[@]} -eq 3 ] || { sleep 0.02; continue; }
  sleep "$(printf "0.%02d" $((RANDOM % 20)))"
  n=$(lines)
  [ "$n" -lt $((requests - 32)) ] || break
  victim=${pids[RANDOM % 3]}
  if [ $((RANDOM % 2)) -eq 0 ]; then sig=KILL; kills=$((kills + 1)); else sig=STOP; stops=$((stops + 1)); fi
  kill -s $sig "$victim" 2>/dev/null || continue
  injected=$((injected + 1))
  last=$(lines)
  echo "fault $injected: SIG$sig to pid $victim after $n results"
done
wait $job
rc=$?
echo "with faults: $(( ($(date +%s%N) - t0) / 1000000 )) ms, exit $rc, $injected faults ($kills SIGKILL, $stops SIGSTOP)"
grep "^sparkrun: attempt" "$d/err" | tail -n 3
[ $rc -eq 0 ] || { tail -n 30 "$d/err"; fail "sparkrun exited $rc"; }
[ $injected -eq "$faults" ] || fail "only $injected of $faults faults were injected before the job ended (make it longer)"
failed=$(grep -c "^sparkrun: attempt [0-9]* of 31 failed" "$d/err")
[ "$failed" -eq "$faults" ] || { grep "^sparkrun: attempt" "$d/err"; fail "$failed failed attempts, not $faults"; }
resumed=$(grep -c "resuming '.*out.jsonl'" "$d/err")
[ "$resumed" -ge 1 ] || fail "no attempt resumed"
[ "$(wc -l <"$d/out.jsonl")" -eq "$requests" ] || fail "$(wc -l <"$d/out.jsonl") result lines, not $requests"
# Every request exactly once, in input order (the ids), and the uninterrupted run's bytes.
diff <(grep -o '"id":"[^"]*"' "$d/req.jsonl") <(grep -o '"id":"[^"]*"' "$d/out.jsonl") >/dev/null ||
  fail "the results' ids are not the requests' ids, each once, in order"
cmp "$d/ref.jsonl" "$d/out.jsonl" || fail "the output differs from the uninterrupted run"
sleep 0.2
[ -z "$(pgrep -f -- "$marker")" ] || { ps -o pid,stat,args -p "$(pgrep -d, -f -- "$marker")"; fail "processes of the job remain"; }
echo "$resumed attempts resumed a partial output"
echo PASS
