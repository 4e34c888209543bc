#!/usr/bin/env bash
# The PyTorch twin (examples/torch_sharded_inference) on the tiny model of the example tests:
# 2 and 3 ranks give its 1-rank run's tokens, logits within 1e-5; its tokens equal the C++
# example's; a torn last line and a partial batch are repaired and the job resumed to the
# uninterrupted run's bytes; a changed model, input or --new-tokens is refused; sparkrun
# killed and the command run again by hand gives the uninterrupted bytes; a job under
# sparkrun --max-restarts with a rank SIGKILLed and one SIGSTOPped (timeout 1 s) finishes with
# every request once and the uninterrupted run's bytes.
#   torch_sharded_inference.sh SPARKRUN SHARDED_INFERENCE PYTHON
set -u
sparkrun=$1 cxx=$2 py=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
twin=$src/examples/torch_sharded_inference/main.py
d=$(mktemp -d)
marker=$(basename "$d")
trap 'for p in $(pgrep -f -- "$marker"); do kill -9 "$p" 2>/dev/null; done; rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$py" -c 'import torch, libspark.torch' 2>/dev/null || { echo "SKIP: no torch with libspark.torch in $py"; exit 77; }
. "$src/tests/examples/tiny_model.sh"
tiny_model "$cxx" "$d" 40
cp "$twin" "$(dirname "$twin")/results_file.py" "$d/"  # the marker in every rank's command line
run() {  # N OUTPUT [options...]
  local n=$1 out=$2
  shift 2
  timeout 180 "$sparkrun" -n "$n" "$py" "$d/main.py" --model "$d/m.safetensors" --input "$d/req.jsonl" \
    --output "$out" --batch 4 --new-tokens 5 "$@" 2>"$d/err"
}
tokens() { grep -o '"tokens":\[[0-9,]*\]' "$1"; }
for n in 1 2 3; do
  run $n "$d/t$n.jsonl" --logits "$d/l$n.bin" --quiet || { cat "$d/err"; fail "-n $n failed"; }
  [ "$(wc -l <"$d/t$n.jsonl")" -eq 40 ] || fail "-n $n: not 40 lines"
done
for n in 2 3; do
  diff <(tokens "$d/t1.jsonl") <(tokens "$d/t$n.jsonl") >/dev/null || fail "-n $n: other tokens than -n 1"
  "$py" - "$d/l1.bin" "$d/l$n.bin" <<'EOF' || fail "-n $n: logits differ from -n 1 by more than 1e-5"
import sys, numpy as np
a, b = (np.fromfile(p, dtype=np.float32) for p in sys.argv[1:3])
d = float(np.abs(a - b).max()) if a.size == b.size and a.size else float("inf")
print(f"-n {sys.argv[2][-5]}: {a.size} logits, largest difference from -n 1: {d:.2e}")
sys.exit(0 if d <= 1e-5 else 1)
EOF
done
# The C++ example's tokens for the same model and requests.
timeout 60 "$sparkrun" -n 1 "$cxx" --model "$d/m.safetensors" --input "$d/req.jsonl" --output "$d/cxx.jsonl" \
  --batch 4 --new-tokens 5 --quiet 2>"$d/err" || { cat "$d/err"; fail "the C++ example failed"; }
diff <(tokens "$d/cxx.jsonl") <(tokens "$d/t1.jsonl") || fail "the twin's tokens differ from the C++ example's"
echo "tokens of -n 1, 2, 3 and of the C++ example: equal"

# A torn last line after 10 complete ones (batch 4): the resume starts at 8, the batch
# boundary; the result is the uninterrupted run's bytes.
head -n 10 "$d/t2.jsonl" >"$d/r.jsonl"
echo -n '{"id":"req-10","log' >>"$d/r.jsonl"
cp "$d/t2.jsonl.job" "$d/r.jsonl.job"
run 2 "$d/r.jsonl" --progress-every 0 || { cat "$d/err"; fail "resume failed"; }
grep -q "removed a torn last line (19 bytes)" "$d/err" || { cat "$d/err"; fail "no note of the torn line"; }
grep -q "2 results after the last whole batch are computed again" "$d/err" || { cat "$d/err"; fail "no batch alignment"; }
grep -q "resuming '.*r.jsonl': 8 of 40 requests done" "$d/err" || { cat "$d/err"; fail "did not resume at 8"; }
grep -q '^progress: 8/40 requests' "$d/err" || { cat "$d/err"; fail "progress did not start at 8"; }
cmp "$d/t2.jsonl" "$d/r.jsonl" || fail "the resumed output differs from the uninterrupted run"

# Refusals name the field; the file stays.
cp "$d/r.jsonl" "$d/saved"
run 2 "$d/r.jsonl" --new-tokens 6 2>/dev/null && fail "a changed --new-tokens was accepted"
grep -q 'new_tokens is 5 there, 6 here' "$d/err" || { cat "$d/err"; fail "--new-tokens refusal"; }
"$cxx" --make-model "$d/m2.safetensors" --layers 2 --dim 48 --heads 6 --ffn 96 --vocab 64 --seed 2 || fail "model 2"
timeout 180 "$sparkrun" -n 2 "$py" "$d/main.py" --model "$d/m2.safetensors" --input "$d/req.jsonl" \
  --output "$d/r.jsonl" --batch 4 --new-tokens 5 2>"$d/err" && fail "a changed model was accepted"
grep -q 'model_sha256 is' "$d/err" || { cat "$d/err"; fail "model refusal"; }
head -n 39 "$d/req.jsonl" >"$d/req39.jsonl"
timeout 180 "$sparkrun" -n 2 "$py" "$d/main.py" --model "$d/m.safetensors" --input "$d/req39.jsonl" \
  --output "$d/r.jsonl" --batch 4 --new-tokens 5 2>"$d/err" && fail "a changed input was accepted"
grep -q 'input_sha256 is' "$d/err" || { cat "$d/err"; fail "input refusal"; }
cmp -s "$d/r.jsonl" "$d/saved" || fail "a refused file was changed"

# sparkrun itself killed mid-job, the same command again by hand: the uninterrupted bytes.
"$sparkrun" -n 2 --max-restarts 2 "$py" "$d/main.py" --model "$d/m.safetensors" --input "$d/req.jsonl" \
  --output "$d/k.jsonl" --batch 4 --new-tokens 5 --quiet 2>"$d/kerr" &
launcher=$!
for _ in $(seq 6000); do
  [ "$(cat "$d/k.jsonl" 2>/dev/null | wc -l)" -ge 8 ] && break
  sleep 0.01
done
kill -9 $launcher
wait $launcher 2>/dev/null
for _ in $(seq 100); do [ -z "$(pgrep -f -- "$d/main.py")" ] && break; sleep 0.1; done
[ -z "$(pgrep -f -- "$d/main.py")" ] || fail "ranks outlived the killed sparkrun"
[ "$(wc -l <"$d/k.jsonl")" -lt 40 ] || fail "the job ended before sparkrun was killed"
run 2 "$d/k.jsonl" --quiet || { cat "$d/err"; fail "the run by hand after the kill failed"; }
grep -q "resuming '.*k.jsonl'" "$d/err" || { cat "$d/err"; fail "the run by hand did not resume"; }
cmp "$d/t2.jsonl" "$d/k.jsonl" || fail "killed sparkrun + run by hand differs from the uninterrupted run"

# Faults under --max-restarts: a SIGKILL, then a SIGSTOP (timeout 1 s), each once the attempt
# wrote a result; then every request once, the uninterrupted run's bytes.
SPARKNET_ROCE_TIMEOUT_MS=1000 timeout 300 "$sparkrun" -n 3 --max-restarts 5 --restart-backoff 0 --kill-grace 1 \
  "$py" "$d/main.py" --model "$d/m.safetensors" --input "$d/req.jsonl" --output "$d/f.jsonl" --batch 4 \
  --new-tokens 5 --quiet 2>"$d/ferr" &
job=$!
RANDOM=40
last=0
for sig in KILL STOP; do
  for _ in $(seq 3000); do
    n=$(cat "$d/f.jsonl" 2>/dev/null | wc -l)
    [ "$n" -gt "$last" ] && break
    sleep 0.01
  done
  [ "$n" -lt 36 ] || fail "the job got too far before SIG$sig"
  mapfile -t pids < <(for p in $(pgrep -f -- "$d/main.py"); do
    [[ $(cat /proc/"$p"/comm 2>/dev/null) == python* ]] && [ "$(awk '{print $3}' /proc/"$p"/stat)" != T ] && echo "$p"
  done)
  [ ${#pids[@]} -eq 3 ] || fail "expected 3 running ranks, found ${#pids[@]}"
  victim=${pids[RANDOM % 3]}
  kill -s $sig "$victim"
  echo "SIG$sig to pid $victim after $n results"
  last=$((n + 4))
done
wait $job || { cat "$d/ferr"; fail "the job with faults failed"; }
[ "$(grep -c "^sparkrun: attempt [0-9] of 6 failed" "$d/ferr")" -eq 2 ] || { grep "^sparkrun" "$d/ferr"; fail "not 2 failed attempts"; }
cmp "$d/t3.jsonl" "$d/f.jsonl" || fail "the output after faults differs from the uninterrupted run"
echo PASS
