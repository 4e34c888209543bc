#!/usr/bin/env bash
# The resumable output of sharded_inference (docs/examples/sharded_inference.md): a torn last
# line is removed and the job resumed (with another --batch and rank count: the same bytes);
# a file changed in the middle, a changed model, input or --new-tokens, and a file without
# its job record are refused naming the field, leaving the file as it was; --restart-output
# starts over; sparkrun itself killed mid-job and the command run again by hand finishes the
# job with every request once and the bytes of an uninterrupted run; progress lines start at
# the resumed count, --quiet has none, a terminal gets a bar.
#   sharded_inference_resume.sh SPARKRUN SHARDED_INFERENCE
set -u
sparkrun=$1 prog=$2
d=$(mktemp -d)
marker=$(basename "$d")
trap 'for p in $(pgrep -f -- "$marker"); do kill -9 "$p" 2>/dev/null; done; rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/tiny_model.sh"
tiny_model "$prog" "$d" 60
run() {  # [batch=B] [nt=T] run N OUTPUT [options...]: on N ranks, stderr to $d/err
  local n=$1 out=$2
  shift 2
  timeout 120 "$sparkrun" -n "$n" "$prog" --model "$d/m.safetensors" --input "$d/req.jsonl" \
    --output "$out" --batch "${batch:-4}" --new-tokens "${nt:-5}" "$@" 2>"$d/err"
}
run 1 "$d/ref.jsonl" || { cat "$d/err"; fail "the reference run failed"; }
[ "$(wc -l <"$d/ref.jsonl")" -eq 60 ] || fail "the reference has $(wc -l <"$d/ref.jsonl") lines, not 60"
grep -q '"format":"spark-batch-results/1"' "$d/ref.jsonl.job" || { cat "$d/ref.jsonl.job"; fail "no job record"; }

# A torn last line: removed, and the job resumes after the last complete line. --batch 3 on
# 3 ranks resuming --batch 4 on 1 rank: the same bytes (results do not depend on either).
head -c "$(head -n 21 "$d/ref.jsonl" | wc -c)" "$d/ref.jsonl" >"$d/out.jsonl"
echo -n '{"id":"req-21","logits_f' >>"$d/out.jsonl"
cp "$d/ref.jsonl.job" "$d/out.jsonl.job"
batch=3 run 3 "$d/out.jsonl" --progress-every 0 || { cat "$d/err"; fail "resuming a torn file failed"; }
grep -q "removed a torn last line (24 bytes)" "$d/err" || { cat "$d/err"; fail "no note of the torn line"; }
grep -q "resuming '.*out.jsonl': 21 of 60 requests done" "$d/err" || { cat "$d/err"; fail "did not resume at 21"; }
grep -q '^summary: 39 requests on 3 ranks (21 more were done before)' "$d/err" || { cat "$d/err"; fail "summary"; }
cmp "$d/ref.jsonl" "$d/out.jsonl" || fail "the resumed output differs from the uninterrupted run"
# Progress: plain lines (stderr is no terminal) from the resumed count on, with rate and ETA.
first=$(grep -m1 '^progress: ' "$d/err")
[ "$first" = "progress: 21/60 requests, 0.0 requests/s, 0 tokens/s, ETA ?" ] ||
  { cat "$d/err"; fail "first progress line: '$first'"; }
grep -Eq '^progress: 24/60 requests, [0-9.]+ requests/s, [0-9]+ tokens/s, ETA [0-9]+:[0-9]{2}:[0-9]{2}$' "$d/err" ||
  { cat "$d/err"; fail "no progress line with rate and ETA after the first batch"; }
grep -q '^progress: 60/60 requests, .* ETA done$' "$d/err" || { cat "$d/err"; fail "no final progress line"; }
# A finished job run again: nothing to do, the file unchanged.
run 2 "$d/out.jsonl" --progress-every 0 --quiet || { cat "$d/err"; fail "re-running a finished job failed"; }
grep -q '^progress' "$d/err" && fail "--quiet printed progress"
grep -q '^summary: 0 requests on 2 ranks (60 more were done before)' "$d/err" || { cat "$d/err"; fail "finished job"; }
cmp "$d/ref.jsonl" "$d/out.jsonl" || fail "re-running a finished job changed it"

# On a terminal: a bar with done/total, tokens/s and ETA (the program run by itself: under
# sparkrun a rank's stderr is a pipe that sparkrun forwards line by line).
head -n 50 "$d/ref.jsonl" >"$d/tty.jsonl"
cp "$d/ref.jsonl.job" "$d/tty.jsonl.job"
TERM=dumb timeout 120 script -qefc "'$prog' --model '$d/m.safetensors' --input '$d/req.jsonl' --output '$d/tty.jsonl' --batch 4 --new-tokens 5" /dev/null >"$d/tty" 2>&1 ||
  { cat "$d/tty"; fail "the run on a terminal failed"; }
grep -aq '\] 60/60 requests  [0-9]* tok/s  ETA done' "$d/tty" || { cat -v "$d/tty"; fail "no progress bar on a terminal"; }
grep -aq '\] 50/60 requests' "$d/tty" || { cat -v "$d/tty"; fail "the bar did not start at the resumed count"; }

# Refusals: the file stays as it was, the message names the field and the fix.
head -n 10 "$d/ref.jsonl" >"$d/part.jsonl"
cp "$d/ref.jsonl.job" "$d/part.jsonl.job"
cp "$d/part.jsonl" "$d/part.saved"
refused() {  # refused WHAT PATTERN: the last run failed, said PATTERN, left the file alone
  grep -q "$2" "$d/err" || { cat "$d/err"; fail "$1: the refusal does not say '$2'"; }
  grep -q "pass --restart-output" "$d/err" || { cat "$d/err"; fail "$1: the refusal names no fix"; }
  cmp -s "$d/part.jsonl" "$d/part.saved" || fail "$1: the refused file was changed"
}
"$prog" --make-model "$d/m2.safetensors" --layers 2 --dim 48 --heads 6 --ffn 96 --vocab 64 --seed 2 || fail "model 2"
timeout 120 "$sparkrun" -n 2 "$prog" --model "$d/m2.safetensors" --input "$d/req.jsonl" --output "$d/part.jsonl" \
  --batch 4 --new-tokens 5 2>"$d/err" && fail "a changed model was accepted"
refused "changed model" 'model_sha256 is "[0-9a-f]\{64\}" there, "[0-9a-f]\{64\}" here'
head -n 59 "$d/req.jsonl" >"$d/req59.jsonl"
timeout 120 "$sparkrun" -n 2 "$prog" --model "$d/m.safetensors" --input "$d/req59.jsonl" --output "$d/part.jsonl" \
  --batch 4 --new-tokens 5 2>"$d/err" && fail "a changed input was accepted"
refused "changed input" 'input_sha256 is'
nt=6 run 2 "$d/part.jsonl" && fail "a changed --new-tokens was accepted"
refused "changed --new-tokens" 'new_tokens is 5 there, 6 here'
run 1 "$d/part.jsonl" --reduce plain && fail "a changed --reduce was accepted"
refused "changed --reduce" 'reduce is "exact" there, "plain" here'
rm "$d/part.jsonl.job"
run 1 "$d/part.jsonl" && fail "a file without its job record was accepted"
refused "no job record" 'has no job record'
cp "$d/ref.jsonl.job" "$d/part.jsonl.job"
sed -i '5s/"tokens":\[/"tokens":[1,/' "$d/part.jsonl"
cp "$d/part.jsonl" "$d/part.saved"
run 1 "$d/part.jsonl" && fail "a file changed in the middle was accepted"
refused "changed line 5" "line 5 is not request 4's result, and more lines follow"
# --restart-output: starts over with the new options.
nt=6 run 2 "$d/part.jsonl" --restart-output || { cat "$d/err"; fail "--restart-output failed"; }
[ "$(wc -l <"$d/part.jsonl")" -eq 60 ] || fail "--restart-output: not 60 lines"
grep -q '"new_tokens":6' "$d/part.jsonl.job" || fail "--restart-output: the job record is not the new job's"
grep -q '"tokens":\[[0-9]*,[0-9]*,[0-9]*,[0-9]*,[0-9]*,[0-9]*\]' "$d/part.jsonl" || fail "--restart-output: not 6 tokens"

# sparkrun itself killed mid-job (its attempt's launcher stops the ranks), then the same
# command again by hand: every request once, the uninterrupted run's bytes (300 requests).
"$prog" --make-requests "$d/req300.jsonl" --count 300 --prompt-len 8 --vocab 64 || fail "requests"
long=(--model "$d/m.safetensors" --input "$d/req300.jsonl" --batch 1 --new-tokens 8 --quiet)
timeout 120 "$sparkrun" -n 1 "$prog" "${long[@]}" --output "$d/ref300.jsonl" 2>"$d/err" || { cat "$d/err"; fail "reference 300"; }
"$sparkrun" -n 2 --max-restarts 3 "$prog" "${long[@]}" --output "$d/killed.jsonl" 2>"$d/err" &
launcher=$!
for _ in $(seq 2000); do
  [ "$(cat "$d/killed.jsonl" 2>/dev/null | wc -l)" -ge 20 ] && break
  sleep 0.01
done
kill -9 "$launcher"
wait "$launcher" 2>/dev/null
for _ in $(seq 100); do [ -z "$(pgrep -f -- "$marker")" ] && break; sleep 0.1; done
[ -z "$(pgrep -f -- "$marker")" ] || fail "ranks outlived the killed sparkrun"
done_lines=$(wc -l <"$d/killed.jsonl")
[ "$done_lines" -lt 300 ] || fail "the job finished before sparkrun was killed"
timeout 120 "$sparkrun" -n 2 --max-restarts 3 "$prog" "${long[@]}" --output "$d/killed.jsonl" 2>"$d/err" ||
  { cat "$d/err"; fail "the run by hand after the kill failed"; }
grep -q "resuming '.*killed.jsonl': [1-9][0-9]* of 300 requests done" "$d/err" || { cat "$d/err"; fail "the run by hand did not resume"; }
cmp "$d/ref300.jsonl" "$d/killed.jsonl" || fail "killed sparkrun + run by hand differs from the uninterrupted run"
echo "sparkrun killed after $done_lines of 300 results; the run by hand finished the job"
echo PASS
