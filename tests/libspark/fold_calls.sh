#!/usr/bin/env bash
# fold_calls.sh READELF OBJECT...: no object of the folds' libraries (fold.cpp, reduce.cpp, as
# built for each level) calls a libspark function through the PLT. An exported function of a
# shared library may be interposed at load time, so the compiler will not inline it: the
# f16/bf16 conversions, called that way, cost a call per element and input and kept those
# folds scalar (coll/fold.cpp gives them internal linkage).
set -euo pipefail
readelf=$1
shift
[ $# -gt 0 ] || { echo "fold_calls.sh: no object to look at"; exit 1; }
bad=0
for obj in "$@"; do
  # Relocation lines: offset info type value name+addend. A call to a global function goes
  # through the PLT when it is linked: R_X86_64_PLT32, R_AARCH64_CALL26 or JUMP26 (a tail call)
  # against its name. spark's names mangle as _ZN5spark...; _GLOBAL__N_ is an anonymous
  # namespace (internal linkage: a direct call, never interposed).
  calls=$("$readelf" -rW "$obj" |
    awk '$3 ~ /PLT|CALL26|JUMP26/ && $5 ~ /^_ZN5spark/ && $5 !~ /_GLOBAL__N_/ { print $5 }' | sort -u)
  if [ -n "$calls" ]; then
    echo "$obj: calls through the PLT:"
    echo "$calls" | sed 's/^/  /'
    bad=1
  fi
done
[ $bad = 0 ] && echo "ok: the folds call no libspark function through the PLT"
exit $bad
