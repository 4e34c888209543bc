#!/usr/bin/env bash
# libspark vs Open MPI on one machine: float-sum allreduce, same sizes and iterations, both
# sides bound (libspark's ranks started by sparkrun, which binds them as mpirun binds Open
# MPI's), runs interleaved, medians; ends with every target row of issue 17 and met / NOT met,
# each with the spread of its run-by-run ratios. Never part of the pass/fail suite.
#   bench/vs_mpi.sh [-B build-dir] [-r repeats] [-i iters] [-s small-iters] [--unbound] [--only CASES]
#   bench/vs_mpi.sh --pairs N [-b size] [-i iters] [-t shm|tcp] [-B build-dir] [-n ranks]
# Cases (--only takes a comma list): shm2 (2 ranks shm, 1 KiB - 16 MiB), work (the same with
# 200 +- 50 us of computation per rank before each call, as in a decode step; the call's own
# time, from the last rank's entry to the exit, is compared: the wait for the slowest rank's
# work, which both libraries pay alike, is shown beside it), shm3 (3 ranks on this machine's CPUs, shm, 1 KiB), tcp2 (2 ranks over
# tcp loopback, Open MPI with --mca btl tcp,self, 1 KiB - 16 MiB).
# Sizes up to 256 KiB run -s iterations (default 2000: with 200 a single preemption moved a
# 1 KiB row by 10-40 %), larger ones -i (default 20, as
# allreduce_perf), both after 50 warm-up iterations (libspark times its two large paths in a
# size's first 13 calls and again from its 30th, coll/copy_tuner.hpp: a job's steady state is
# measured).
# --unbound: start libspark's ranks through the environment rendezvous, unbound (the old way;
# not a fair comparison: mpirun binds Open MPI's ranks to cores).
# --pairs N: N paired runs at ONE size (-b, default 1024) over -t (shm, the default, or tcp
# loopback), in alternating order; each run prints its in-process time per iteration (slowest
# rank's mean over -i iterations, default 20000 up to 256 KiB, else 20); the ratio spark/mpi is
# taken pair by pair (< 1: libspark is faster), which drift between runs cannot skew.
# SPARK_SPIN_US, when set, is passed to libspark's ranks (to compare wait settings).
# --json FILE: also write the target rows as one result set (bench/README.md, "Result records"),
# e.g. bench/results/vs_mpi-quiet.json; then bench/report puts them on docs/benchmarks.md.
# --variant quiet|loaded (default quiet): what the machine was doing; "loaded" is for runs
# beside CPU-bound load (two `yes > /dev/null` on a 2-CPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build ranks=2 pair_transport=shm lo=1024 small_max=262144 iters= small_iters=2000 repeats=3 bound=1 pairs=0 only=shm2,work,shm3,tcp2
json= variant=quiet cmdline="bench/vs_mpi.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    -B) build=$2; shift 2 ;;
    -n) ranks=$2; shift 2 ;;
    -b) lo=$2; shift 2 ;;
    -t) pair_transport=$2; shift 2 ;;
    -i) iters=$2; shift 2 ;;
    -s) small_iters=$2; shift 2 ;;
    -r) repeats=$2; shift 2 ;;
    --unbound) bound=0; shift ;;
    --sparkrun) bound=1; shift ;;  # the default now; kept for old command lines
    --only) only=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --json) json=$(cd "$OLDPWD" && realpath -m "$2"); shift 2 ;;  # relative to where it was started
    --variant) variant=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "vs_mpi.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
perf=$build/examples/allreduce_perf sparkrun=$build/launcher/sparkrun
[ -x "$perf" ] || { echo "vs_mpi.sh: $perf not found; build the allreduce_perf target first" >&2; exit 1; }
[ "$bound" = 0 ] || [ -x "$sparkrun" ] ||
  { echo "vs_mpi.sh: $sparkrun not found; build the sparkrun target (or pass --unbound)" >&2; exit 1; }
command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null ||
  { echo "vs_mpi.sh: needs mpicc.openmpi and mpirun.openmpi (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc.openmpi -O2 -o "$tmp/mpi_allreduce" bench/mpi_allreduce.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# spark RANKS TRANSPORT LO HI WORK(us:jitter or "") ITERS -> CSV "size,time_us,algbw,coll_us,own_us"
spark() {
  local n=$1 transport=$2 b=$3 e=$4 work=$5 it=$6
  local args=(--csv -b "$b" -e "$e" -f 4 -n "$it" -w 50 -c 0 ${work:+--work "$work"})
  if [ "$bound" = 1 ]; then
    SPARK_TRANSPORT=$transport "$sparkrun" -n "$n" ${SPARK_SPIN_US:+-x SPARK_SPIN_US} "$perf" "${args[@]}"
  else
    local port=$((20000 + RANDOM % 30000)) r pids=()
    for ((r = 1; r < n; r++)); do
      SPARK_TRANSPORT=$transport SPARK_SIZE=$n SPARK_RANK=$r SPARK_RENDEZVOUS=127.0.0.1:$port \
        "$perf" "${args[@]}" >/dev/null &
      pids+=($!)
    done
    SPARK_TRANSPORT=$transport SPARK_SIZE=$n SPARK_RANK=0 SPARK_RENDEZVOUS=127.0.0.1:$port \
      "$perf" "${args[@]}"
    wait "${pids[@]}"
  fi | awk -F, 'NR > 1 && $1 == "allreduce" { print $4 "," $9 "," $10 "," $13 "," $14 }'
}
# mpi RANKS TRANSPORT LO HI WORK ITERS -> the same CSV (mpirun binds to cores by default)
mpi() {
  local n=$1 transport=$2 b=$3 e=$4 work=$5 it=$6 mca=()
  [ "$transport" = tcp ] && mca=(--mca btl tcp,self)
  local w=()
  [ -n "$work" ] && w=(-W "${work%%:*}" -J "${work##*:}")
  mpirun.openmpi --oversubscribe -n "$n" "${mca[@]}" "$tmp/mpi_allreduce" -b "$b" -e "$e" -f 4 \
    -n "$it" -w 50 "${w[@]}" | awk -F, 'NR > 1'
}

if [ "$pairs" -gt 0 ]; then
  case "$pair_transport" in
    shm | tcp) ;;
    *) echo "vs_mpi.sh: -t '$pair_transport': expected shm or tcp" >&2; exit 2 ;;
  esac
  ((lo <= small_max)) && iters=${iters:-20000}
  iters=${iters:-20}
  for ((k = 0; k < pairs; k++)); do
    if ((k % 2 == 0)); then
      spark "$ranks" "$pair_transport" "$lo" "$lo" "" "$iters" >"$tmp/s.$k"
      mpi "$ranks" "$pair_transport" "$lo" "$lo" "" "$iters" >"$tmp/m.$k"
    else
      mpi "$ranks" "$pair_transport" "$lo" "$lo" "" "$iters" >"$tmp/m.$k"
      spark "$ranks" "$pair_transport" "$lo" "$lo" "" "$iters" >"$tmp/s.$k"
    fi
  done
  python3 - "$tmp" "$pairs" "$lo" "$ranks" "$pair_transport" "$iters" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
tmp, pairs, size, ranks, transport, iters, l0, l1 = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def t(path):
    line = open(path).read().split()
    return float(line[-1].split(",")[1]) if line else float("nan")
s = [t(f"{tmp}/s.{k}") for k in range(pairs)]
m = [t(f"{tmp}/m.{k}") for k in range(pairs)]
r = [a / b for a, b in zip(s, m)]
print(f"== {size} B allreduce, {ranks} ranks, {transport}, float sum: {pairs} alternating pairs x {iters} iterations (load {l0} -> {l1})")
print("pair  spark_us  mpi_us  spark/mpi")
for k in range(pairs):
    print(f"{k:>4} {s[k]:>9.2f} {m[k]:>7.2f} {r[k]:>10.2f}")
print(f"median: spark {statistics.median(s):.2f} us, mpi {statistics.median(m):.2f} us; "
      f"min: spark {min(s):.2f} us, mpi {min(m):.2f} us")
print(f"per-pair spark/mpi: median {statistics.median(r):.2f}, min {min(r):.2f}, max {max(r):.2f}; "
      f"pairs where spark was faster: {sum(x < 1 for x in r)}/{pairs}")
PY
  exit 0
fi

iters=${iters:-20}
# case name, ranks, transport, lo, hi, work
cases=("shm2 2 shm 1024 16777216 -" "work 2 shm 1024 16777216 200:50" "shm3 3 shm 1024 1024 -"
       "tcp2 2 tcp 1024 16777216 -")
for ((k = 0; k < repeats; k++)); do
  for c in "${cases[@]}"; do
    read -r name n transport b e work <<<"$c"
    [[ ",$only," == *",$name,"* ]] || continue
    [ "$work" = - ] && work=
    # Small sizes with more iterations, large ones with allreduce_perf's default.
    ranges=("$b $((e < small_max ? e : small_max)) $small_iters")
    ((e > small_max)) && ranges+=("1048576 $e $iters")
    for rg in "${ranges[@]}"; do
      read -r rb re it <<<"$rg"
      if ((k % 2 == 0)); then
        spark "$n" "$transport" "$rb" "$re" "$work" "$it" >>"$tmp/spark_$name.$k"
        mpi "$n" "$transport" "$rb" "$re" "$work" "$it" >>"$tmp/mpi_$name.$k"
      else
        mpi "$n" "$transport" "$rb" "$re" "$work" "$it" >>"$tmp/mpi_$name.$k"
        spark "$n" "$transport" "$rb" "$re" "$work" "$it" >>"$tmp/spark_$name.$k"
      fi
    done
  done
done

python3 - "$tmp" "$repeats" "$small_iters/$iters" "$bound" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$json" "$variant" "$cmdline" <<'PY'
import statistics, sys
tmp, repeats, iters, bound, l0, l1, json_out, variant, cmdline = sys.argv[1:]
sys.dont_write_bytecode = True
sys.path.insert(0, "bench")
import results
rs = results.ResultSet("vs_mpi", variant, cmdline, load=f"{l0} -> {l1}") if json_out else None
def runs(side, case):
    """Run k of `side` for `case`: {size: (time, algbw, coll, own)}, one per repeat."""
    out = []
    for k in range(int(repeats)):
        rows = {}
        try:
            for line in open(f"{tmp}/{side}_{case}.{k}"):
                size, *v = line.strip().split(",")[:5]
                rows[int(size)] = tuple(map(float, v))
        except OSError:
            pass
        out.append(rows)
    return out
def medians(rs):
    sizes = {s for r in rs for s in r}
    return {s: tuple(statistics.median(r[s][i] for r in rs if s in r) for i in range(4)) for s in sizes}
titles = {"shm2": "2 ranks, shared memory (Open MPI: default btl, vader + CMA)",
          "work": "2 ranks, shared memory, work step 200 +- 50 us before each call (coll: the call's time incl. the wait for the slowest rank's work; own: from the last rank's entry)",
          "shm3": "3 ranks on this machine's CPUs, shared memory",
          "tcp2": "2 ranks, tcp loopback (Open MPI: --mca btl tcp,self)"}
data = {}
for name, title in titles.items():
    sr, mr = runs("spark", name), runs("mpi", name)
    sp, mp = medians(sr), medians(mr)
    if not sp or not mp:
        continue
    data[name] = (sp, mp, sr, mr)
    print(f"== {title}: median of {repeats} runs x {iters} iterations")
    own = name == "work"
    print(f"{'size':>10} {'spark_us':>10} {'mpi_us':>10} {'spark_coll':>11} {'mpi_coll':>10} {'coll_ratio':>10} {'spark_GB/s':>10} {'mpi_GB/s':>9} {'bw_ratio':>8}"
          + (f" {'spark_own':>10} {'mpi_own':>10} {'own_ratio':>9}" if own else ""))
    for s in sorted(set(sp) & set(mp)):
        (st, sb, sc, so), (mt, mb, mc, mo) = sp[s], mp[s]
        print(f"{s:>10} {st:>10.2f} {mt:>10.2f} {sc:>11.2f} {mc:>10.2f} {sc / mc:>10.2f} {sb:>10.3f} {mb:>9.3f} {(sb / mb if mb else 0):>8.2f}"
              + (f" {so:>10.2f} {mo:>10.2f} {so / mo:>9.2f}" if own else ""))
print(f"(coll_ratio = spark / Open MPI time of the call itself: < 1 means libspark is faster; "
      f"bw_ratio = spark / Open MPI algbw; libspark ranks {'bound by sparkrun' if bound == '1' else 'UNBOUND (--unbound)'})")
print(f"== targets (issue 17), default settings, load average {l0} at the start, {l1} at the end")
def per_run(case, size, col):
    """spark/Open MPI of column `col` run by run (run k of each side ran back to back): its
    spread shows how far the VM's drift moves a row that sits near its line."""
    out = [s[size][col] / m[size][col] for s, m in zip(data[case][2], data[case][3])
           if size in s and size in m and m[size][col]]
    return f"; runs {min(out):.2f}-{max(out):.2f}" if len(out) > 1 else ""
def row(what, case, size, kind, target):
    if case not in data or size not in data[case][0] or size not in data[case][1]:
        return
    (st, sb, sc, so), (mt, mb, mc, mo) = data[case][0][size], data[case][1][size]
    if kind == "time":
        # The work step compares the call's own time (from the last rank's entry): the wait for
        # the slowest rank's work is the same for both libraries and no library can shorten it.
        if case == "work":
            sc, mc = so, mo
        v = sc / mc
        ok = v <= target
        spread = per_run(case, size, 3 if case == "work" else 2)
        if rs:
            rs.row(what, "us", sc, "<=", "Open MPI", mc, ratio=target, spread=spread[7:])
        print(f"{what:<52} time ratio {v:5.2f} (spark {sc:.2f} us, mpi {mc:.2f} us{spread}), target <= {target}: {'met' if ok else 'NOT met'}")
    else:
        v = sb / mb if mb else 0
        ok = v >= target
        spread = per_run(case, size, 1)
        if rs:
            rs.row(what + " algbw", "GB/s", sb, ">=", "Open MPI", mb, ratio=target, spread=spread[7:])
        print(f"{what:<52} algbw ratio {v:5.2f} (spark {sb:.3f}, mpi {mb:.3f} GB/s{spread}), target >= {target}: {'met' if ok else 'NOT met'}")
for case, label in (("shm2", "2 ranks shm"), ("work", "2 ranks shm, work step")):
    for s in (1024, 4096, 16384, 65536, 262144):
        row(f"{label}, {s // 1024} KiB", case, s, "time", 0.5)
    row(f"{label}, 16 MiB", case, 16 << 20, "bw", 1.3)
row("3 ranks on 2 cpus shm, 1 KiB", "shm3", 1024, "time", 1.0)
row("tcp loopback 2 ranks, 1 KiB", "tcp2", 1024, "time", 1.0)
row("tcp loopback 2 ranks, 16 MiB", "tcp2", 16 << 20, "bw", 1.2)
if rs:
    rs.write(json_out)
PY
