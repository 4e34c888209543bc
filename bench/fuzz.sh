#!/usr/bin/env bash
# Longer fuzzing runs of every harness (never part of the test run; the suite's `fuzz` label
# runs each for 5 s). Figures go to docs/reliability.md.
#   bench/fuzz.sh [BUILD_DIR] [SECONDS_EACH] [HARNESS...]
# Builds the harnesses in BUILD_DIR/fuzz (clang-14, libFuzzer + ASan + UBSan) and runs each
# for SECONDS_EACH (default 300) over its seed corpus. Inputs that add coverage are printed
# as a count and dropped (copy them into tests/fuzz/corpus/NAME by hand when worth keeping);
# a crash stops with its input in BUILD_DIR/fuzz/artifacts/ (add it to the corpus as
# regression-*, then fix the parser).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} secs=${2:-300}
shift $(( $# > 2 ? 2 : $# ))
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  names=($(sed -n '/^set(spark_fuzzers/,/)/p' tests/fuzz/CMakeLists.txt | tr -d '()' | tr ' ' '\n' \
    | grep -v -e '^set' -e '^spark_fuzzers' -e '^$'))
fi
rc=0
tests/fuzz/fuzz.sh build "$build/fuzz" || rc=$?
[[ $rc -eq 0 ]] || exit $rc
for n in "${names[@]}"; do
  tests/fuzz/fuzz.sh run "$build/fuzz" "$n" "$secs" | tail -1
done
