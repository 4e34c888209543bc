#!/usr/bin/env bash
# install_test.sh BUILD_DIR APP_SOURCE WORK_DIR
set -euo pipefail
build=$1 app=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
test -x "$prefix/bin/sparkrun" || { echo "FAIL: sparkrun not installed"; exit 1; }
test -f "$prefix/include/spark/spark.hpp" || { echo "FAIL: headers not installed"; exit 1; }

# 1. CMake package: find_package(sparkrun) gives spark::spark.
cmake -S "$app" -B "$work/app-build" -DCMAKE_PREFIX_PATH="$prefix" >"$work/app-configure.log"
cmake --build "$work/app-build" >"$work/app-build.log"
out=$("$work/app-build/tiny_app")
echo "$out"
[[ "$out" == "tiny_app: rank 0 of 1 sum 1" ]] || { echo "FAIL: singleton run printed '$out'"; exit 1; }
out=$("$prefix/bin/sparkrun" -n 2 "$work/app-build/tiny_app" | sort)
echo "$out"
[[ "$out" == $'tiny_app: rank 0 of 2 sum 3\ntiny_app: rank 1 of 2 sum 3' ]] ||
  { echo "FAIL: 2-rank run under the installed sparkrun printed '$out'"; exit 1; }

# 2. pkg-config: `spark`, as installed (the prefix follows the install, no --define-variable),
# with no -std flag of our own: the Cflags carry what the headers need.
PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name spark.pc | head -1)")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs spark)
[[ "$flags" == *"$prefix"* ]] || { echo "FAIL: spark.pc ignores the install prefix: $flags"; exit 1; }
# shellcheck disable=SC2086
c++ "$app/main.cpp" -o "$work/tiny_app_pc" $flags
out=$("$work/tiny_app_pc")
[[ "$out" == "tiny_app: rank 0 of 1 sum 1" ]] || { echo "FAIL: pkg-config build printed '$out'"; exit 1; }

# 3. The build tree is a package too: find_package(sparkrun) with sparkrun_DIR=BUILD_DIR.
cmake -S "$app" -B "$work/app-tree" -Dsparkrun_DIR="$(realpath "$build")" >"$work/app-tree.log"
cmake --build "$work/app-tree" >>"$work/app-tree.log"
out=$("$work/app-tree/tiny_app")
[[ "$out" == "tiny_app: rank 0 of 1 sum 1" ]] || { echo "FAIL: build-tree package app printed '$out'"; exit 1; }
echo "install test: PASS"
