# Sourced by the example tests: the small model and requests they all run (one shape, so the
# examples' outputs stay comparable), made in DIR with the sharded_inference program.
#   tiny_model SHARDED_INFERENCE DIR REQUESTS   -> DIR/m.safetensors, DIR/req.jsonl
tiny_model() {
  "$1" --make-model "$2/m.safetensors" --layers 2 --dim 48 --heads 6 --ffn 96 --vocab 64 \
    --blocks 6 || fail "--make-model failed"
  "$1" --make-requests "$2/req.jsonl" --count "$3" --prompt-len 8 --vocab 64 ||
    fail "--make-requests failed"
}
