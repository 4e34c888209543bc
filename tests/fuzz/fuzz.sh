#!/usr/bin/env bash
# The fuzz label's driver (tests/fuzz/CMakeLists.txt, docs/reliability.md).
#   fuzz.sh build DIR            configure + build the harnesses in DIR with clang (14 on
#                                Debian 12; the release's own, from scripts/deps, elsewhere)
#   fuzz.sh run DIR NAME [SECS]  run harness NAME for SECS (SPARK_FUZZ_SECONDS, default 5)
# The seed corpus (tests/fuzz/corpus/NAME, with every regression input) is read, never
# written: what a run finds goes to a temporary folder that is removed afterwards; a crash
# leaves its input in DIR/artifacts/ and fails the test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=$1 dir=$2
cxx=${SPARK_FUZZ_CXX:-}
if [[ -z $cxx ]]; then  # scripts/deps: clang-14 on Debian 12, 19 on Debian 13, 18 on Ubuntu 24.04
  cxx=clang++-14
  for v in 14 19 18; do command -v "clang++-$v" >/dev/null && { cxx=clang++-$v; break; }; done
fi

case $cmd in
build)
  if ! command -v "$cxx" >/dev/null; then
    echo "skipped: $cxx not found (scripts/deps --test installs clang and libFuzzer)"
    exit 77
  fi
  rt=$("$cxx" -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
  if [[ "$(uname -m)" == x86_64 && ! -f "$rt" ]]; then
    echo "skipped: libFuzzer not found for $cxx (scripts/deps --test: libclang-rt-N-dev)"
    exit 77
  fi
  mkdir -p "$dir"
  if ! cmake -S "$here" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" >"$dir.configure.log" 2>&1; then
    cat "$dir.configure.log"
    exit 1
  fi
  start=$SECONDS
  cmake --build "$dir" -j"$(nproc)"
  echo "fuzz harnesses built in $((SECONDS - start)) s"
  ;;
run)
  name=$3
  secs=${4:-${SPARK_FUZZ_SECONDS:-5}}
  bin=$dir/fuzz_$name
  if [[ ! -x $bin ]]; then
    echo "skipped: $bin was not built (see the fuzz.build test)"
    exit 77
  fi
  work=$(mktemp -d /tmp/spark-fuzz.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$dir/artifacts"
  log=$work/log
  rc=0
  "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/$name-" "$work" "$here/corpus/$name" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  found=$(find "$work" -type f ! -name log | wc -l)
  if [[ $rc -ne 0 ]]; then
    grep -v '^#' "$log" | tail -60
    echo "fuzz $name: FAILED (exit $rc); the input is in $dir/artifacts/"
    exit 1
  fi
  grep -E '^#[0-9]+ +DONE' "$log" || true
  echo "fuzz $name: ${execs:-?} execs in $secs s, $(find "$here/corpus/$name" -type f | wc -l) seeds, $found new inputs, no crash"
  ;;
*)
  echo "usage: $0 build DIR | run DIR NAME [SECONDS]" >&2
  exit 2
  ;;
esac
