#!/usr/bin/env bash
# libspark vs Open MPI: 2-rank float-sum allreduce over shared memory and over tcp loopback,
# same sizes, one run, ratios printed. Never part of the pass/fail suite.
#   bench/vs_mpi.sh [-B build-dir] [-n ranks] [-b min] [-e max] [-f factor] [-i iters] [-r repeats] [--sparkrun]
#   bench/vs_mpi.sh --pairs N [-b size] [-i iters] [-B build-dir] [-n ranks]   (latency, shm only)
# Each configuration runs `repeats` times, interleaved (spark, mpi, spark, mpi, ...), and the
# median per size is reported: the machine is shared and noisy.
# --pairs N: N paired runs at ONE size (-b, default 1024) over shm, in alternating order
# (spark then mpi, mpi then spark, ...); each run prints its in-process time per iteration
# (slowest rank's mean over -i iterations, default 20000). The ratio spark/mpi is taken pair by
# pair, so a drift of the machine's speed hits both sides of a pair alike; reported: medians,
# minima and the median / min / max of the per-pair ratios (< 1: libspark is faster).
# Targets (issue 4): shm 16 MiB algbw >= 1.3x Open MPI; 1 KiB latency <= Open MPI;
# tcp 16 MiB algbw >= 1.2x Open MPI with --mca btl tcp,self.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build ranks=2 lo=1024 hi=$((16 << 20)) factor=4 iters= repeats=3 use_sparkrun=0 pairs=0
while [ $# -gt 0 ]; do
  case "$1" in
    -B) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -b) lo=$2; shift 2 ;;
    -e) hi=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -i) iters=$2; shift 2 ;;
    -r) repeats=$2; shift 2 ;;
    --sparkrun) use_sparkrun=1; shift ;;
    --pairs) pairs=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "vs_mpi.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
perf=$build/examples/allreduce_perf
[ -x "$perf" ] || { echo "vs_mpi.sh: $perf not found; build the allreduce_perf target first" >&2; exit 1; }
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null ||
  { echo "vs_mpi.sh: needs mpicc.openmpi and mpirun.openmpi (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc.openmpi -O2 -o "$tmp/mpi_allreduce" bench/mpi_allreduce.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "$pairs" -gt 0 ]; then hi=$lo iters=${iters:-20000}; else iters=${iters:-20}; fi

# spark TRANSPORT OUT: CSV "size,time_us,algbw"
spark() {
  local transport=$1 out=$2
  if [ "$use_sparkrun" = 1 ] && [ -x "$build/launcher/sparkrun" ]; then
    SPARK_TRANSPORT=$transport "$build/launcher/sparkrun" -n "$ranks" "$perf" --csv -b "$lo" -e "$hi" -f "$factor" -n "$iters" -w 5 -c 0
  else
    local port=$((20000 + RANDOM % 30000)) r pids=()
    for ((r = 1; r < ranks; r++)); do
      SPARK_TRANSPORT=$transport SPARK_SIZE=$ranks SPARK_RANK=$r SPARK_RENDEZVOUS=127.0.0.1:$port \
        "$perf" --csv -b "$lo" -e "$hi" -f "$factor" -n "$iters" -w 5 -c 0 >/dev/null &
      pids+=($!)
    done
    SPARK_TRANSPORT=$transport SPARK_SIZE=$ranks SPARK_RANK=0 SPARK_RENDEZVOUS=127.0.0.1:$port \
      "$perf" --csv -b "$lo" -e "$hi" -f "$factor" -n "$iters" -w 5 -c 0
    wait "${pids[@]}"
  fi | awk -F, 'NR > 1 && $1 == "allreduce" { print $4 "," $9 "," $10 }' >"$out"
}
mpi() {  # MCA-ARGS... ; CSV on stdout
  mpirun.openmpi --oversubscribe -n "$ranks" "$@" "$tmp/mpi_allreduce" -b "$lo" -e "$hi" -f "$factor" -n "$iters" -w 5 |
    awk -F, 'NR > 1'
}

if [ "$pairs" -gt 0 ]; then
  for ((k = 0; k < pairs; k++)); do
    if ((k % 2 == 0)); then
      spark shm "$tmp/s.$k"; mpi >"$tmp/m.$k"
    else
      mpi >"$tmp/m.$k"; spark shm "$tmp/s.$k"
    fi
  done
  python3 - "$tmp" "$pairs" "$lo" "$ranks" "$iters" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
tmp, pairs, size, ranks, iters, load = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def t(path):
    line = open(path).read().split()
    return float(line[-1].split(",")[1]) if line else float("nan")
s = [t(f"{tmp}/s.{k}") for k in range(pairs)]
m = [t(f"{tmp}/m.{k}") for k in range(pairs)]
r = [a / b for a, b in zip(s, m)]
print(f"== {size} B allreduce, {ranks} ranks, shm, float sum: {pairs} alternating pairs x {iters} iterations (load {load})")
print("pair  spark_us  mpi_us  spark/mpi")
for k in range(pairs):
    print(f"{k:>4} {s[k]:>9.2f} {m[k]:>7.2f} {r[k]:>10.2f}")
print(f"median: spark {statistics.median(s):.2f} us, mpi {statistics.median(m):.2f} us; "
      f"min: spark {min(s):.2f} us, mpi {min(m):.2f} us")
print(f"per-pair spark/mpi: median {statistics.median(r):.2f}, min {min(r):.2f}, max {max(r):.2f} "
      f"(target: median <= 1.0); pairs where spark was faster: {sum(x < 1 for x in r)}/{pairs}")
PY
  exit 0
fi

for ((k = 0; k < repeats; k++)); do
  spark shm "$tmp/spark_shm.$k"
  mpi >"$tmp/mpi_shm.$k"
  spark tcp "$tmp/spark_tcp.$k"
  mpi --mca btl tcp,self >"$tmp/mpi_tcp.$k"
done

# Median per size over the repeats, then the ratios (python3: mawk has no sort).
report() {  # NAME SPARK-GLOB MPI-GLOB
  python3 - "$1" "$ranks" "$repeats" "$2" "$3" <<'PY'
import glob, statistics, sys
name, ranks, repeats, sg, mg = sys.argv[1:]
def load(pattern):
    rows = {}
    for f in glob.glob(pattern):
        for line in open(f):
            size, t, bw = line.strip().split(",")
            rows.setdefault(int(size), []).append((float(t), float(bw)))
    return {s: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v)) for s, v in rows.items()}
sp, mp = load(sg), load(mg)
print(f"== {name}: {ranks} ranks, float sum, median of {repeats} runs (time us, algbw GB/s)")
print(f"{'size':>12} {'spark_us':>10} {'mpi_us':>10} {'t_ratio':>8} {'spark_bw':>10} {'mpi_bw':>10} {'bw_ratio':>8}")
for s in sorted(set(sp) & set(mp)):
    (st, sb), (mt, mb) = sp[s], mp[s]
    print(f"{s:>12} {st:>10.2f} {mt:>10.2f} {mt / st:>8.2f} {sb:>10.3f} {mb:>10.3f} {(sb / mb if mb else 0):>8.2f}")
PY
}
report "shared memory (Open MPI default btl)" "$tmp/spark_shm.*" "$tmp/mpi_shm.*"
report "tcp loopback (Open MPI --mca btl tcp,self)" "$tmp/spark_tcp.*" "$tmp/mpi_tcp.*"
echo "(t_ratio = mpi_time / spark_time: > 1 means libspark is faster; bw_ratio = spark_bw / mpi_bw)"
echo "targets: shm 16777216 bw_ratio >= 1.3; shm 1024 t_ratio >= 1.0; tcp 16777216 bw_ratio >= 1.2"
