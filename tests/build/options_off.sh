#!/usr/bin/env bash
# The build options work (issue 41: -DSPARK_BUILD_TESTS=OFF failed at configure, tests/examples
# called gtest_discover_tests): configures this source tree with the test suite and the examples
# off, and with each of them alone, in a temporary folder that is removed at the end. Configure
# only (a few seconds); the parts' libraries are built by the ordinary build.
#
#   options_off.sh SOURCE_DIR CMAKE GENERATOR
set -euo pipefail
src=$1 cmake=$2 generator=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/spark_options_off.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail=0
for combo in "OFF OFF" "OFF ON" "ON OFF"; do
  read -r tests examples <<<"$combo"
  dir="$tmp/tests_${tests}_examples_${examples}"
  opts=(-DSPARK_BUILD_TESTS="$tests" -DSPARK_BUILD_EXAMPLES="$examples" -DSPARK_ENABLE_CUDA=OFF)
  if ! "$cmake" -S "$src" -B "$dir" -G "$generator" "${opts[@]}" >"$tmp/configure.log" 2>&1; then
    grep -v '^-- ' "$tmp/configure.log" | tail -30
    echo "FAIL: configure with ${opts[*]} failed"
    fail=1
    continue
  fi
  # What is off is not configured at all: no test of the suite, no example program.
  if [[ $tests == OFF && -e "$dir/tests" ]]; then
    echo "FAIL: ${opts[*]} still configured tests/"
    fail=1
  fi
  if [[ $examples == OFF && -e "$dir/examples" ]]; then
    echo "FAIL: ${opts[*]} still configured examples/"
    fail=1
  fi
  echo "configured with ${opts[*]}"
done
[[ $fail == 0 ]] && echo PASS
exit "$fail"
