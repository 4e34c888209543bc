#!/usr/bin/env bash
# Multi-host benchmark on 3 network namespaces (needs root): 3-host launch time and a
# 1 KiB / 128 KiB / 16 MiB float-sum allreduce across the namespaces, sparkrun vs Open MPI, one run.
#   bench/multihost.sh [-B build-dir] [-r runs] [-i iters] [-s small-iters]
# The namespaces come from tests/multihost/netns_fixture.sh (removed afterwards). sparkrun
# uses --launch-agent 'ip netns exec {host}'; Open MPI gets the same agent through a
# small wrapper (its rsh agent passes the remote command as one shell string).
# Open MPI's allreduce is measured with its defaults and with mpi_yield_when_idle=1, and
# its best per size is the reference. Targets: launch <= 0.3x Open MPI (issue 8); allreduce
# 1 KiB and 128 KiB <= 0.9x Open MPI's best, 16 MiB ahead of it, printed with
# met / NOT met and the load. Never part of the pass/fail suite.
# 1 KiB and 128 KiB run -s iterations (default 1000: with 20 a run of a 70 us call lasted
# 1.4 ms, and one preemption or the wait policy's first calls moved the row), 16 MiB -i.
# SPARK_SPIN_US, when set, is passed to the ranks (-x) to compare wait settings.
# --json FILE (relative to where it is started) also writes the target rows as one result set
# for bench/report (bench/README.md); --variant quiet|loaded (default quiet) says what else ran.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build runs=10 iters=50 small_iters=1000 json= variant=quiet cmdline="bench/multihost.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    -B) build=$2; shift 2 ;;
    -r) runs=$2; shift 2 ;;
    -i) iters=$2; shift 2 ;;
    -s) small_iters=$2; shift 2 ;;
    --json) json=$(cd "$OLDPWD" && realpath -m "$2"); shift 2 ;;  # relative to where it was started
    --variant) variant=$2; shift 2 ;;
    --cmdline) cmdline=$2; shift 2 ;;  # passed on through the namespace fixture
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "multihost.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
build=$(realpath "$build")
if [ -z "${MH_HOSTS:-}" ]; then
  exec tests/multihost/netns_fixture.sh "$(realpath "$0")" -B "$build" -r "$runs" -i "$iters" -s "$small_iters" \
    ${json:+--json "$json"} --variant "$variant" --cmdline "$cmdline"
fi
sparkrun=$build/launcher/sparkrun perf=$build/examples/allreduce_perf
for f in "$sparkrun" "$perf"; do
  [ -x "$f" ] || { echo "multihost.sh: $f not found; build sparkrun and allreduce_perf first" >&2; exit 1; }
done
for c in mpicc.openmpi mpirun.openmpi hyperfine; do
  command -v $c >/dev/null || { echo "multihost.sh: needs $c" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each namespace's orted gets a session directory of its own: they all run on host "vm", and
# racing for the same one failed a launch now and then ("mkdir ... File exists").
printf '#!/bin/sh\nns=$1; shift\nmkdir -p %s/$ns\nexec ip netns exec "$ns" env OMPI_MCA_orte_tmpdir_base=%s/$ns sh -c "$*"\n' \
  "$tmp" "$tmp" >"$tmp/agent"
chmod +x "$tmp/agent"
mpicc.openmpi -O2 -o "$tmp/mpi_allreduce" bench/mpi_allreduce.c
sr=("$sparkrun" --launch-agent "$MH_AGENT" --control-net "$MH_NET" -n 3 --host "$MH_HOSTS")
mr=(mpirun.openmpi -n 3 --host "$MH_HOSTS" --mca plm_rsh_agent "$tmp/agent"
    --mca oob_tcp_if_include "$MH_NET" --mca btl_tcp_if_include "$MH_NET" --mca btl self,tcp
    --mca routed direct)  # its default routing tree failed now and then ("does not know how to route")

echo "== 3-host launch (/bin/true on each of 3 namespaces), hyperfine, $runs runs"
hyperfine -N -i --warmup 2 --runs "$runs" --export-json "$tmp/launch.json" \
  -n sparkrun "$(printf '%q ' "${sr[@]}") /bin/true" -n mpirun "$(printf '%q ' "${mr[@]}") /bin/true" >/dev/null
python3 - "$tmp/launch.json" "$tmp/rows.jsonl" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) * 1000 for x in json.load(open(sys.argv[1]))["results"]}
print(f"sparkrun {r['sparkrun']:.1f} ms   mpirun {r['mpirun']:.1f} ms   ratio {r['sparkrun'] / r['mpirun']:.2f} (target <= 0.30)")
with open(sys.argv[2], "w") as f:
    print(json.dumps({"what": "3-host launch, /bin/true", "unit": "ms", "ours": r["sparkrun"], "peer_name": "Open MPI mpirun",
                      "peer": r["mpirun"], "target": {"op": "<=", "ratio": 0.3}}), file=f)
PY

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== allreduce across 3 namespaces over tcp (float sum, $small_iters iters up to 128 KiB, $iters at 16 MiB, median of 3 runs)"
for k in 1 2 3; do
  for range in "1024 131072 $small_iters" "16777216 16777216 $iters"; do
    read -r b e n <<<"$range"
    "${sr[@]}" -x SPARK_TRANSPORT=tcp ${SPARK_SPIN_US:+-x SPARK_SPIN_US} ${SPARK_TCP_LANES:+-x SPARK_TCP_LANES} "$perf" --csv -b "$b" -e "$e" -f 128 -n "$n" -w 5 -c 0 |
      awk -F, 'NR > 1 && $1 == "allreduce" { print $4 "," $9 "," $10 }' >>"$tmp/spark.$k"
    "${mr[@]}" "$tmp/mpi_allreduce" -b "$b" -e "$e" -f 128 -n "$n" -w 5 | awk -F, 'NR > 1' >>"$tmp/mpi.$k"
    "${mr[@]}" --mca mpi_yield_when_idle 1 "$tmp/mpi_allreduce" -b "$b" -e "$e" -f 128 -n "$n" -w 5 |
      awk -F, 'NR > 1' >>"$tmp/mpiy.$k"
  done
done
python3 - "$tmp" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" "$json" "$variant" "$cmdline" <<'PY'
import glob, json, statistics, sys
tmp, l0, l1, json_out, variant, cmdline = sys.argv[1:]
sys.dont_write_bytecode = True
sys.path.insert(0, "bench")
import results
rs = results.ResultSet("multihost", variant, cmdline, load=f"{l0} -> {l1}") if json_out else None
if rs:
    rs.data["rows"] += [json.loads(line) for line in open(f"{tmp}/rows.jsonl")]
def load(name):
    rows = {}
    for f in glob.glob(f"{tmp}/{name}.*"):
        for line in open(f):
            size, t, bw = line.strip().split(",")[:3]
            rows.setdefault(int(size), []).append((float(t), float(bw)))
    return {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v)) for s, v in rows.items()}
sp, mp, my = load("spark"), load("mpi"), load("mpiy")
print(f"{'size':>9} {'spark_us':>10} {'ompi_us':>10} {'ompi_yield_us':>14} {'ratio_to_best':>14} {'spark_GB/s':>11} {'ompi_best_GB/s':>15}")
for s in sorted(sp):
    st, sb = sp[s]
    best = min((x for x in (mp.get(s), my.get(s)) if x), key=lambda v: v[0])
    print(f"{s:>9} {st:>10.1f} {mp.get(s, (float('nan'),))[0]:>10.1f} {my.get(s, (float('nan'),))[0]:>14.1f} "
          f"{st / best[0]:>14.2f} {sb:>11.3f} {best[1]:>15.3f}")
print(f"== targets, default settings, load average {l0} at the start, {l1} at the end")
for s, target, what in ((1024, 0.9, "1 KiB"), (131072, 0.9, "128 KiB"), (16777216, 1.0, "16 MiB")):
    if s not in sp:
        continue
    best = min((x for x in (mp.get(s), my.get(s)) if x), key=lambda v: v[0])
    r = sp[s][0] / best[0]
    ok = r <= target if s != 16777216 else r < target
    rule = f"<= {target}" if s != 16777216 else "< 1.0 (stays ahead)"
    print(f"3 hosts tcp, {what:<8} time ratio to Open MPI's best {r:5.2f} (spark {sp[s][0]:.1f} us, best {best[0]:.1f} us), target {rule}: {'met' if ok else 'NOT met'}")
    if rs:
        rs.row(f"3 hosts tcp, {what}", "us", sp[s][0], "<=" if s != 16777216 else "<",
               "Open MPI, best of default and yield", best[0], ratio=target)
if rs:
    rs.write(json_out)
PY
