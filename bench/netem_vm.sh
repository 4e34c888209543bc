#!/usr/bin/env bash
# Wire faults from netem in the Soft-RoCE VM pair (docs/reliability.md, "netem in the VMs"):
# boots the pair of tests/rdma/vm_mesh.sh once and runs every case of tests/rdma/vm_netem.sh
# (tcp: delay 5 ms +- 2 ms, reorder 25 %, duplicate 5 %, corrupt 0.1 % and 1 %, loss 1 %, all at
# once; roce: loss 1 % + delay 5 ms, corrupt 0.1 % and 1 %, the cable cut), each a stream of mixed collectives with
# every element checked. Prints the table (slowdown against the clean case of the same
# transport in the same boot) and writes bench/results/netem_vm-VARIANT.json for bench/report.
# The suite runs a lean subset inside rdma.vm_pair. Exit 1 when a case failed (a wrong
# element, a hang, a fail-stop without a record naming the lane, a cut outliving its bound).
#   bench/netem_vm.sh [BUILD_DIR] [VARIANT]     (~5 min on 2 busy cores)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} variant=${2:-loaded}
work=$(mktemp -d /tmp/sparknetem.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 30 rounds per case (the suite's lean cases run 10).
printf 'export NETEM_ROUNDS=30\n. /bin/vm_netem.sh\n' >"$work/inside.sh"
tests/rdma/vm_mesh.sh --cache "$build/vmcache" --work "$work/vm" --timeout 1200 --mem 1024 \
  --links 1-2,1-2 --bin "$build/tests/fault/fault_stream" --bin tests/rdma/vm_netem.sh \
  "$work/inside.sh" >"$work/log" 2>&1
rc=$?
grep -a '^vm[12]| === .*\(FAIL\|PASS\)' "$work/log" | tr -d '\r'
tr -d '\r' <"$work/vm/1/console.log" | grep -a '^NETEM,' >"$work/rows"
[ -s "$work/rows" ] || { echo "netem_vm: no rows (vm_mesh exit $rc); log:"; tail -40 "$work/log"; exit 1; }
python3 - "$work/rows" "$variant" "bench/results/netem_vm-$variant.json" "$*" <<'PY'
import sys
sys.path.insert(0, "bench")
import results
rows_file, variant, out, args = sys.argv[1:]
rows = [l.rstrip("\n").split(",", 5) for l in open(rows_file)]
clean = {t: float(ms) for _, case, t, outcome, ms, _ in rows if case.endswith("_clean") and outcome == "completed"}
rs = results.ResultSet("netem_vm", variant, command=f"bench/netem_vm.sh {args}".strip(),
                       note="2 ranks in 2 qemu VMs (TCG), netem on both VMs' egress of the data cable; "
                            "ms: the stream's own time (completed) or from the cut to the exit; "
                            "ratio: against the clean case of the same transport in the same boot")
print("| case | transport | outcome | time | vs clean | notes |\n| --- | --- | --- | --- | --- | --- |")
for _, case, transport, outcome, ms, notes in rows:
    ms_v = float(ms) if ms not in ("", "-") else None
    ratio = ms_v / clean[transport] if ms_v is not None and transport in clean and outcome == "completed" else None
    print(f"| {case} | {transport} | {outcome} | {ms} ms | {f'{ratio:.2f}x' if ratio else '-'} | {notes} |")
    if case == "roce_cut":
        # The fail-stop within SPARKNET_ROCE_TIMEOUT_MS (3000) + 3000 ms of the cut.
        rs.row(f"{case} ({transport}): cut to fail-stop", "ms", ms_v, "<=", value=6000, note=notes)
    elif ratio is not None:
        rs.row(f"{case} ({transport}): {outcome}", "ms", ms_v, None, peer_name="clean link",
               peer=clean[transport], ratio=ratio, note=notes)
rs.write(out)
PY
exit $rc
