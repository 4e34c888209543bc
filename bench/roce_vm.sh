#!/usr/bin/env bash
# RoCE vs tcp on the same virtual cables, relay vs direct (docs/roce.md, "Figures"): boots the
# triangle and the 4-ring of tests/rdma/vm_mesh.sh and runs bench/roce_vm_inside.sh in every VM
# (allreduce 1 KiB..16 MiB, same iterations, same ranks, same links for both transports).
# Under TCG only the shape of the numbers means anything. Never pass/fail.
#   bench/roce_vm.sh [BUILD_DIR]      (needs allreduce_perf built; ~15 min on 2 busy cores)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
work=$(mktemp -d /tmp/sparkrocebench.XXXXXX)
trap 'rm -rf "$work"' EXIT
for shape in triangle ring; do
  links=1-2,1-3,2-3
  [[ $shape == ring ]] && links=1-2,2-3,3-4,1-4
  printf 'shape=%s\n. /bin/roce_vm_inside.sh\n' "$shape" >"$work/$shape.sh"
  "$here/../tests/rdma/vm_mesh.sh" --cache "$build/vmcache" --work "$work/$shape" --timeout 900 \
    --mem 640 --links "$links" --bin "$build/examples/allreduce_perf" \
    --bin "$here/roce_vm_inside.sh" "$work/$shape.sh" >"$work/$shape.log" 2>&1
  echo "$shape: vm_mesh exit $? (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
cat "$work"/*/*/console.log | tr -d '\r' | grep -a '^BENCH' | sort -u >"$work/rows"
grep -a 'BENCH_FAIL' "$work"/*/*/console.log >&2
python3 - "$work/rows" <<'PY'
import sys, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    _, case, transport, size, us = line.strip().split(",")
    rows[case][int(size)] = float(us)
def table(title, a, b, label):
    if a not in rows or b not in rows: return
    print(f"\n{title}\n| size | {a} (us) | {b} (us) | {label} |\n| --- | --- | --- | --- |")
    for s in sorted(rows[a]):
        if s in rows[b]:
            print(f"| {s//1024} KiB | {rows[a][s]:.0f} | {rows[b][s]:.0f} | {rows[b][s]/rows[a][s]:.2f} |")
table("triangle, 3 ranks, allreduce", "triangle_roce", "triangle_tcp", "tcp / roce")
table("4-ring, 4 ranks, allreduce (opposite pairs relayed)", "ring_roce", "ring_tcp", "tcp / roce")
table("3 ranks on roce: triangle (all direct) vs line (1 <-> 3 relayed by 2)", "triangle_roce", "line3_roce", "relay / direct")
PY
