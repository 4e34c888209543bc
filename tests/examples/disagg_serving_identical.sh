#!/usr/bin/env bash
# disagg_serving's results equal sharded_inference's on one rank bit for bit (tokens and the
# FNV hash of every logits vector) for the splits 1+1, 1+2 and 2+1; every request's KV hand-off
# is reported (bytes, time, rate, time to first token) and the KV bytes are the model's
# (layers x 2 x prompt length x dim x 4); stdin in and stdout out give the same; a split that
# does not fill the world is refused.
#   disagg_serving_identical.sh SPARKRUN DISAGG_SERVING SHARDED_INFERENCE
set -u
sparkrun=$1 prog=$2 ref=$3
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/tiny_model.sh"
tiny_model "$ref" "$d" 10
run="--model $d/m.safetensors --input $d/req.jsonl --batch 4 --new-tokens 5"
timeout 60 "$sparkrun" -n 1 "$ref" $run --output "$d/ref.jsonl" 2>"$d/err" || { cat "$d/err"; fail "reference run exited $?"; }
for split in 1+1 1+2 2+1; do
  p=${split%+*} q=${split#*+}
  timeout 60 "$sparkrun" -n $((p + q)) "$prog" $run --prefill $p --decode $q --output "$d/out$p$q.jsonl" \
    2>"$d/err$p$q" || { cat "$d/err$p$q"; fail "$split exited $?"; }
  cat "$d/err$p$q"
  cmp "$d/ref.jsonl" "$d/out$p$q.jsonl" || fail "$split: results differ from sharded_inference -n 1"
  grep -q "^summary: 10 requests on $((p + q)) ranks (prefill $p, decode $q)" "$d/err$p$q" || fail "$split: no summary"
  grep -Eq '^summary: KV hand-off [0-9.]+ MB in all, .* time to first token p50 [0-9.]+ ms, max [0-9.]+ ms$' \
    "$d/err$p$q" || fail "$split: no hand-off summary"
  [ "$(grep -c '^request "req-[0-9]*": prompt [0-9]* tokens, KV [0-9.]* KB moved in [0-9.]* ms ([0-9.]* GB/s), first token at prefill [0-9.]* ms, on decode (with its KV) [0-9.]* ms$' "$d/err$p$q")" -eq 10 ] ||
    fail "$split: expected one hand-off line per request"
  # req-0's prompt has 4 tokens: 2 layers x (k, v) x 4 x 48 floats = 3.1 KB, whatever the split.
  grep -q '^request "req-0": prompt 4 tokens, KV 3.1 KB moved' "$d/err$p$q" || fail "$split: req-0 did not move 3.1 KB"
done
# Requests on stdin (rank 0 reads them), results on stdout (the first decode rank writes
# them), the default split of 3 ranks (1+2): the same results.
timeout 60 "$sparkrun" -n 3 "$prog" --model "$d/m.safetensors" --batch 4 --new-tokens 5 <"$d/req.jsonl" \
  >"$d/stdout.jsonl" 2>"$d/errs" || { cat "$d/errs"; fail "stdin/stdout run exited $?"; }
grep -q '^summary: 10 requests on 3 ranks (prefill 1, decode 2)' "$d/errs" || fail "default split of 3 ranks is not 1+2"
cmp "$d/ref.jsonl" "$d/stdout.jsonl" || fail "stdin/stdout run gave other results"
timeout 60 "$sparkrun" -n 3 "$prog" $run --prefill 2 --decode 2 >/dev/null 2>"$d/errbad" && fail "2+2 on 3 ranks was accepted"
grep -q 'do not fill the 3 ranks' "$d/errbad" || { cat "$d/errbad"; fail "2+2 on 3 ranks: no clear message"; }
echo PASS
