#!/usr/bin/env bash
# python.torch_configure: configure (nothing built) refuses a torch the backend cannot be built
# against, naming the reason, with SPARK_ENABLE_TORCH=ON:
#   - headers of one version, an importable torch of another (a stand-in torch, fake_torch/,
#     pointing at the real headers): both versions named
#   - the real torch when it is older than 2.1 (Debian 12's 1.13), else a torch (the stand-in
#     again) built with the pre-C++11 string ABI
# Usage: torch_configure.sh SOURCE_DIR PYTHON. Exit 77 when this interpreter has no torch headers.
set -uo pipefail
src=$1 py=$2
here=$(cd "$(dirname "$0")" && pwd)
paths=$("$py" "$src/python/torch_paths.py" 2>/dev/null) || { echo "SKIP: $py has no torch"; exit 77; }
include=$(sed -n 's/^include=\([^,]*\).*/\1/p' <<<"$paths")
libdir=$(sed -n 's/^libdir=\([^,]*\).*/\1/p' <<<"$paths")
release=$(sed -n 's/^release=//p' <<<"$paths")
[[ -f $include/torch/csrc/api/include/torch/version.h ]] || { echo "SKIP: no torch headers in $include"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
configure() {  # NAME EXPECTED-REGEX [ENV...]
  local name=$1 want=$2
  shift 2
  out=$(env "$@" cmake -S "$src" -B "$tmp/$name" -DSPARK_BUILD_TESTS=OFF -DSPARK_BUILD_EXAMPLES=OFF \
    -DSPARK_ENABLE_CUDA=OFF -DSPARK_ENABLE_PYTHON=ON -DSPARK_ENABLE_TORCH=ON -DSPARK_PYTHON="$py" 2>&1)
  rc=$?
  out=$(tr -s ' \n' ' ' <<<"$out")  # CMake wraps its messages
  if [[ $rc == 0 ]]; then
    echo "FAIL: $name: configure accepted it"; fails=1
  elif ! grep -Eq "$want" <<<"$out"; then
    echo "$out" | tail -15; echo "FAIL: $name: no line matching: $want"; fails=1
  else
    echo "ok: $name: $(grep -Eo "$want" <<<"$out" | head -1)"
  fi
}
fake=(PYTHONPATH="$here/fake_torch" FAKE_TORCH_INCLUDE="$include" FAKE_TORCH_LIBDIR="$libdir")
configure mismatch "headers in .* are $release but .* imports torch 2\.5\.9" "${fake[@]}" FAKE_TORCH_VERSION=2.5.9
if [[ $release == 1.* || $release == 2.0.* ]]; then
  configure too_old "torch $release[^ ]* is older than 2\.1"
else  # the ABI is looked at once the version qualifies
  configure old_abi "pre-C\+\+11 string ABI" "${fake[@]}" FAKE_TORCH_VERSION="$release" FAKE_TORCH_ABI=0
fi
[[ $fails == 0 ]] && echo "PASS: torch_configure"
exit $fails
