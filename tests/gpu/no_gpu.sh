#!/usr/bin/env bash
# run.sh on a machine without a GPU: one command, one line that says so, exit 77 (skip), and
# nothing built. Where a GPU is present this test skips: run.sh then does the real run
# (minutes), which is not a unit test.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: this machine has a GPU; run tests/gpu/run.sh itself"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spark_gpu_run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out=$(SPARK_GPU_BUILD_DIR="$tmp/build" bash "$here/run.sh" 2>&1)
rc=$?
echo "$out"
fail=0
[[ $rc == 77 ]] || { echo "FAIL: run.sh exited $rc without a GPU (77 expected)"; fail=1; }
grep -q '^gpu/run.sh: no GPU found' <<<"$out" || { echo "FAIL: no 'no GPU found' line"; fail=1; }
[[ ! -e "$tmp/build/CMakeCache.txt" ]] || { echo "FAIL: run.sh configured a build"; fail=1; }
[[ $fail == 0 ]] && echo PASS
exit "$fail"
