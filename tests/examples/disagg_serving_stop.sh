#!/usr/bin/env bash
# A decode rank that stops (SIGSTOP) while it receives a KV cache ends the job: the survivors
# time out (SPARKNET_ROCE_TIMEOUT_MS=500) and sparkrun's first record line names the stopped
# rank; nothing is left behind.  disagg_serving_stop.sh SPARKRUN DISAGG_SERVING SHARDED_INFERENCE
set -u
sparkrun=$1 prog=$2 ref=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/tiny_model.sh"
tiny_model "$ref" "$d" 40
marker="$d/m.safetensors"  # on every rank's command line
for split in "1 1 1" "1 2 2"; do
  set -- $split
  p=$1 q=$2 victim=$3
  SPARKNET_ROCE_TIMEOUT_MS=500 timeout 60 "$sparkrun" -n $((p + q)) --kill-grace 1 "$prog" \
    --model "$marker" --input "$d/req.jsonl" --batch 4 --new-tokens 5 --prefill $p --decode $q \
    --stop-in-kv-recv $victim --output "$d/out" >"$d/log" 2>&1
  rc=$?
  cat "$d/log"
  [ $rc -ne 0 ] || fail "$p+$q: the job exited 0"
  [ $rc -ne 124 ] || fail "$p+$q: the job hung"
  grep -q "^disagg_serving: rank $victim stops itself (SIGSTOP) while receiving the KV cache" "$d/log" ||
    fail "$p+$q: rank $victim did not stop in the KV receive"
  first=$(grep '^sparkrun: ' "$d/log" | grep -v '^sparkrun: note: ' | head -n 1)
  echo "$first" | grep -Eq "^sparkrun: rank ([0-9]+) aborted: rank \1: .*(from|at|to) rank $victim .*\(timeout 500 ms\)" ||
    fail "$p+$q: the first record does not name rank $victim: $first"
  sleep 0.2
  [ -z "$(pgrep -f -- "$marker")" ] || fail "$p+$q: processes of the job remain"
done
echo PASS
