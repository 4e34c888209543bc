#!/usr/bin/env bash
# libspark's RoCE path against Open MPI 4.1 over UCX on the same Soft-RoCE devices
# (docs/roce.md, "Against UCX"): boots the VM pair of tests/rdma/vm_mesh.sh once (two cables;
# data on rxe0/eth0, control on eth1) and runs bench/roce_vs_ucx_inside.sh: float-sum
# allreduce, 2 ranks (one per VM), 1 KiB to 16 MiB, the same iterations, runs alternating;
# then node 1's rxe0 counters per allreduce of each library at 1 KiB and 1 MiB. Under TCG only
# the ratio means anything. Target: at most 1.0x UCX's time at every size (met / NOT met per
# size, on the medians of the repeats). Writes bench/results/roce_vs_ucx-VARIANT.json for
# bench/report. Never pass/fail.
#   bench/roce_vs_ucx.sh [BUILD_DIR] [VARIANT] [REPEATS] [MAXBYTES]     (MAXBYTES 16 MiB by default)
# Needs allreduce_perf built, mpicc.openmpi / mpirun (libopenmpi-dev, openmpi-bin) and UCX
# (libucx0, which Debian's Open MPI depends on).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} variant=${2:-loaded} reps=${3:-3} hi=${4:-16777216}
perf=$build/examples/allreduce_perf
[ -x "$perf" ] || { echo "roce_vs_ucx: $perf not found; build the allreduce_perf target" >&2; exit 1; }
command -v mpicc.openmpi >/dev/null && command -v orted >/dev/null ||
  { echo "roce_vs_ucx: needs mpicc.openmpi and orted (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 1; }
lib=/usr/lib/x86_64-linux-gnu
[ -d $lib/ucx ] || { echo "roce_vs_ucx: UCX's modules ($lib/ucx) missing: apt-get install libucx0" >&2; exit 1; }
work=$(mktemp -d /tmp/sparkucx.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc.openmpi -O2 -o "$work/mpi_allreduce" bench/mpi_allreduce.c || exit 1
printf 'reps=%s hi=%s\n. /bin/roce_vs_ucx_inside.sh\n' "$reps" "$hi" >"$work/inside.sh"
# Open MPI's components, help texts and settings, PMIx's components and UCX's modules are
# dlopen'ed or read at run time: the whole folders go into the initramfs.
trees=()
for t in $lib/openmpi /usr/share/openmpi /etc/openmpi $lib/pmix2 /usr/share/pmix $lib/ucx; do
  [ -d "$t" ] && trees+=(--tree "$t")
done
t0=$(date +%s)
load0=$(cut -d' ' -f1 /proc/loadavg)
tests/rdma/vm_mesh.sh --cache "$build/vmcache" --work "$work/vm" --timeout 1500 --mem 1536 \
  --links 1-2,1-2 --bin "$perf" --bin "$work/mpi_allreduce" --bin "$(command -v mpirun)" \
  --bin "$(command -v orted)" --bin bench/roce_vs_ucx_inside.sh "${trees[@]}" "$work/inside.sh" \
  >"$work/log" 2>&1
rc=$?
echo "roce_vs_ucx: vm_mesh exit $rc after $(($(date +%s) - t0)) s" >&2
tr -d '\r' <"$work/vm/1/console.log" >"$work/console"
grep -a -A30 'BENCH_FAIL' "$work/console" | head -60 >&2
grep -a 'UCX  *\(ERROR\|FATAL\|WARN\)\|Fatal\|fatal' "$work/console" | head -20 >&2
grep -a '^=== ' "$work/console" >&2
grep -a '^UCX' "$work/console" >"$work/rows"
grep -q '^UCXBENCH,ucx,' "$work/rows" && grep -q '^UCXBENCH,spark,' "$work/rows" || { echo "roce_vs_ucx: no rows of one library or both; nothing written. The log's end:" >&2; tail -60 "$work/log" >&2; exit 1; }
python3 - "$work/rows" "$variant" "bench/results/roce_vs_ucx-$variant.json" \
  "bench/roce_vs_ucx.sh $*" "$load0 -> $(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import collections, statistics, sys
sys.path.insert(0, "bench")
import results
rows_file, variant, out, command, load = sys.argv[1:]
times = collections.defaultdict(list)      # (lib, bytes) -> [us per repeat]
counts = collections.defaultdict(dict)     # (lib, bytes) -> {counter: per allreduce}
ucx_env = ""
where = "pair"                             # "local": the pair failed, both ranks ran in vm1
lanes = []                                 # UCX's lanes per endpoint configuration (its info log)
for line in open(rows_file):
    f = line.strip().split(",")
    if f[0] == "UCXBENCH":
        times[(f[1], int(f[3]))].append(float(f[4]))
    elif f[0] == "UCXENV":
        ucx_env = ",".join(f[1:]).strip()
    elif f[0] == "UCXWHERE":
        where = f[1].strip()
    elif f[0] == "UCXLANES":
        lanes.append(",".join(f[1:]).strip())
    elif f[0] == "UCXCOUNT":
        counts[(f[1], int(f[2]))][f[3]] = float(f[4])
def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
rs = results.ResultSet("roce_vs_ucx", variant, command=command, load=load,
                       note=("2 ranks in 2 qemu VMs (TCG, Soft-RoCE rxe0 over a qemu socket cable)" if where == "pair" else
                             "2 ranks in ONE qemu VM on rxe0 (rxe loopback; UCX's UD wire-up between the two VMs timed out)") +
                            ", float-sum "
                            "allreduce; libspark SPARK_TRANSPORT=roce vs Open MPI 4.1 --mca pml ucx " +
                            (ucx_env or "-x UCX_NET_DEVICES=rxe0:1") +
                            "; median of the alternating repeats, slowest rank's mean" +
                            (f"; UCX's lanes: {'; '.join(lanes)}" if lanes else ""))
print("| size | libspark (us) | UCX (us) | ratio | target <= 1.0x | runs spark / ucx |\n| --- | --- | --- | --- | --- | --- |")
for b in sorted({b for _, b in times}):
    s, u = times.get(("spark", b), []), times.get(("ucx", b), [])
    if not s or not u:
        print(f"| {size(b)} | {s} | {u} | - | no pair | |")
        continue
    ms, mu = statistics.median(s), statistics.median(u)
    spread = [a / c for a, c in zip(s, u)]
    print(f"| {size(b)} | {ms:.0f} | {mu:.0f} | {ms / mu:.2f}x | {'met' if ms <= mu else 'NOT met'} | {len(s)} / {len(u)} |")
    rs.row(f"2 VMs roce, {size(b)}", "us", ms, "<=", peer_name="Open MPI 4.1 + UCX 1.13", peer=mu, ratio=1.0,
           spread=f"{min(spread):.2f}-{max(spread):.2f}")
if counts:
    names = sorted({k for c in counts.values() for k in c})
    print("\nrxe0 counters of node 1 per allreduce (2 ranks)\n")
    print("| size | library | " + " | ".join(names) + " |\n| --- | --- | " + " | ".join("---" for _ in names) + " |")
    for (lib, b) in sorted(counts, key=lambda k: (k[1], k[0])):
        print(f"| {size(b)} | {lib} | " + " | ".join(f"{counts[(lib, b)].get(n, 0):.1f}" for n in names) + " |")
        c = counts[(lib, b)]
        rs.row(f"rxe0 packets sent per allreduce, {size(b)}, {'libspark' if lib == 'spark' else 'UCX'}", "packets",
               c.get("sent_pkts", 0), None,
               note=", ".join(f"{n} {v:.1f}" for n, v in sorted(c.items())))
rs.write(out)
PY
