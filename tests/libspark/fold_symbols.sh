#!/usr/bin/env bash
# fold_symbols.sh NM LEVEL OBJECT...: every global symbol an object of the folds compiled for
# LEVEL (coll/fold.hpp) defines lies in its namespace spark::coll::LEVEL. A global symbol
# outside it (an inline function, a template instance) could be picked by the linker for the
# baseline's callers too, and run AVX-512 on a CPU without it.
set -euo pipefail
nm=$1 level=$2
shift 2
bad=0
for obj in "$@"; do
  # -g: every external symbol, whatever its class (T, W, V, D, B, R, u for GNU unique, i for
  # an ifunc)
  while read -r _ kind name; do
    # DW.ref.__gxx_personality_v0: the word that points unwinding at the C++ runtime's
    # personality routine, the same in every object that has unwind data; no code of the level.
    case $name in "spark::coll::$level::"* | DW.ref.__gxx_personality_v0) ;; *) echo "$obj: $kind $name: outside spark::coll::$level"; bad=1 ;; esac
  done < <("$nm" -C -g --defined-only "$obj" | grep -E '^[0-9a-f]+ [A-Za-z] ')
  n=$("$nm" -C --defined-only "$obj" | grep -c " [TW] spark::coll::$level::fold(" || true)
  [ "$n" = 1 ] || { echo "$obj: defines spark::coll::$level::fold $n times, not once"; bad=1; }
done
[ $bad = 0 ] && echo "ok: $level's objects define only spark::coll::$level::*"
exit $bad
