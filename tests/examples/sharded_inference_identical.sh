#!/usr/bin/env bash
# The outputs of sparkrun -n 1, -n 2 and -n 3 are identical bit for bit (tokens and an FNV
# hash of every logits vector), on a small model; a bad model file and an unfit rank count
# are refused with a clear message.  sharded_inference_identical.sh SPARKRUN SHARDED_INFERENCE
set -u
sparkrun=$1 prog=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/tiny_model.sh"
tiny_model "$prog" "$d" 10
for n in 1 2 3; do
  timeout 60 "$sparkrun" -n $n "$prog" --model "$d/m.safetensors" --input "$d/req.jsonl" \
    --output "$d/out$n.jsonl" --batch 4 --new-tokens 5 2>"$d/err$n" || { cat "$d/err$n"; fail "-n $n exited $?"; }
  grep -q '^summary: 10 requests on '$n' ranks' "$d/err$n" || { cat "$d/err$n"; fail "-n $n: no summary"; }
  grep -q 'collectives' "$d/err$n" || fail "-n $n: summary lacks the collectives time"
done
[ "$(wc -l <"$d/out1.jsonl")" -eq 10 ] || fail "expected 10 result lines, got $(wc -l <"$d/out1.jsonl")"
grep -q '"id":"req-9","logits_fnv":"[0-9a-f]\{16\}","tokens":\[[0-9,]*\]' "$d/out1.jsonl" || { cat "$d/out1.jsonl"; fail "unexpected result format"; }
cmp "$d/out1.jsonl" "$d/out2.jsonl" || fail "-n 1 and -n 2 differ"
cmp "$d/out1.jsonl" "$d/out3.jsonl" || fail "-n 1 and -n 3 differ"
# stdin input gives the same results.
timeout 60 "$sparkrun" -n 2 "$prog" --model "$d/m.safetensors" --batch 4 --new-tokens 5 <"$d/req.jsonl" >"$d/stdin.jsonl" 2>/dev/null ||
  fail "stdin run failed"
cmp "$d/out1.jsonl" "$d/stdin.jsonl" || fail "stdin input gave other results"
# 4 ranks cannot share 6 blocks: refused, naming the fix.
timeout 60 "$sparkrun" -n 4 "$prog" --model "$d/m.safetensors" --input "$d/req.jsonl" >/dev/null 2>"$d/err4" &&
  fail "-n 4 with 6 blocks was accepted"
grep -q 'cannot share evenly' "$d/err4" || { cat "$d/err4"; fail "-n 4: no clear message"; }
# A truncated model file is refused with a message naming the file.
head -c 100 "$d/m.safetensors" >"$d/bad.safetensors"
timeout 60 "$sparkrun" -n 1 "$prog" --model "$d/bad.safetensors" --input "$d/req.jsonl" >/dev/null 2>"$d/errb" &&
  fail "a truncated model was accepted"
grep -q 'bad.safetensors: ' "$d/errb" || { cat "$d/errb"; fail "truncated model: message does not name the file"; }
echo PASS
