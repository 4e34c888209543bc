#!/usr/bin/env bash
# Start-up cost against the number of ranks on this machine: the whole job's wall time of a
# hello with wire-up (examples/hello: init, one 4 KiB allreduce, check, exit; bench/mpi_hello.c
# does the same for MPI) for sparkrun, Hydra + MPICH and mpirun + Open MPI at 2 to 64 ranks,
# plus `-n 3 /bin/true` under sparkrun and Hydra beside the fork+exec floor (bench/spawn_floor.c:
# N copies forked at once). The commands of one size run in turn, in a rotating order, -r times;
# medians, and sparkrun's ratio to Hydra run by run (its spread). A peer that runs past
# --timeout is stopped (SIGTERM, then SIGKILL after 15 s) and skipped from that size on, which
# the output says. Never pass/fail.
#   bench/scaling.sh [-B build-dir] [-r repeats] [--ranks 2,4,8,16,32,64] [--timeout S]
#                    [--json FILE] [--variant quiet|loaded] [--before-lib DIR]
# Targets (issue 43, each against Hydra + MPICH in the same run): hello at 4 ranks <= 0.3x,
# at 32 and 64 ranks <= 1.0x; `-n 3 /bin/true` <= 0.75x. The other sizes are curve points.
# --json FILE: the rows as one result set (bench/README.md), e.g. bench/results/scaling-quiet.json.
# --before-lib DIR: also run the hello with the libspark.so.0 in DIR (LD_LIBRARY_PATH, e.g. one
# built from an older commit): a "before" column in the same run, and curve rows for it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${SPARK_BUILD_DIR:-build} repeats=5 ranks=2,4,8,16,32,64 timeout=60 json= variant=quiet before=
cmdline="bench/scaling.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    -B) build=$2; shift 2 ;;
    -r) repeats=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --json) json=$(cd "$OLDPWD" && realpath -m "$2"); shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    --before-lib) before=$(realpath "$2"); shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
sparkrun=$build/launcher/sparkrun hello=$build/examples/hello
for f in "$sparkrun" "$hello"; do
  [ -x "$f" ] || { echo "scaling.sh: $f not built (cmake --build $build --target sparkrun hello)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/spawn_floor" bench/spawn_floor.c
peers=()
if command -v mpicc.mpich >/dev/null && command -v mpiexec.hydra >/dev/null; then
  mpicc.mpich -O2 -o "$tmp/hello_mpich" bench/mpi_hello.c && peers+=(hydra)
else
  echo "scaling.sh: no Hydra + MPICH (apt-get install mpich libmpich-dev): sparkrun's figures only" >&2
fi
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/hello_ompi" bench/mpi_hello.c && peers+=(ompi)
else
  echo "scaling.sh: no Open MPI (apt-get install openmpi-bin libopenmpi-dev): left out" >&2
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

[ -z "$before" ] || [ -f "$before/libspark.so.0" ] || { echo "scaling.sh: no libspark.so.0 in $before" >&2; exit 1; }
SPARKRUN=$sparkrun HELLO=$hello TMPD=$tmp PEERS="${peers[*]}" LOAD_START=$load_start BEFORE=$before \
  python3 - "$repeats" "$ranks" "$timeout" "$json" "$variant" "$cmdline" <<'PY'
import os, signal, statistics, subprocess, sys, time
sys.dont_write_bytecode = True
sys.path.insert(0, "bench")
import results

repeats, sizes, timeout = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")], float(sys.argv[3])
out, variant, cmdline = sys.argv[4], sys.argv[5], sys.argv[6]
tmp, peers = os.environ["TMPD"], os.environ["PEERS"].split()
ompi_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
NAMES = {"sparkrun": "sparkrun", "hydra": "Hydra + MPICH 4.0", "ompi": "mpirun + Open MPI 4.1",
         "floor": "fork+exec floor", "before": "sparkrun, libspark before"}
before_env = dict(os.environ, LD_LIBRARY_PATH=os.environ["BEFORE"]) if os.environ["BEFORE"] else None

def command(who, n, program):
    """argv and environment of one run; program is 'hello' or '/bin/true'."""
    if who == "sparkrun":
        return [os.environ["SPARKRUN"], "-n", str(n), os.environ["HELLO"] if program == "hello" else program], None
    if who == "before":
        return [os.environ["SPARKRUN"], "-x", "LD_LIBRARY_PATH", "-n", str(n), os.environ["HELLO"]], before_env
    if who == "hydra":
        return ["mpiexec.hydra", "-n", str(n), f"{tmp}/hello_mpich" if program == "hello" else program], None
    if who == "ompi":
        return ["mpirun.openmpi", "--oversubscribe", "-n", str(n),
                f"{tmp}/hello_ompi" if program == "hello" else program], ompi_env
    return [f"{tmp}/spawn_floor", str(n), program], None

def run(argv, env):
    """Wall time in ms, or None after the timeout (the whole process group is killed)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM first: sparkrun then stops its ranks and removes the job's segments itself.
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
        return None
    ms = (time.perf_counter() - t0) * 1000
    if p.returncode != 0:
        sys.exit(f"scaling.sh: {' '.join(argv)} failed (exit {p.returncode}): {err.decode()[-2000:]}")
    return ms

def curve(program, n, who_list, skipped):
    """{who: [ms per repeat]} with the commands run in turn, rotating the order."""
    times = {w: [] for w in who_list if w not in skipped}
    for rep in range(repeats + 1):  # the first round warms the page cache and is dropped
        order = [w for w in who_list if w not in skipped]
        k = rep % len(order) if order else 0
        for who in order[k:] + order[:k]:
            if who in skipped:
                continue
            argv, env = command(who, n, program)
            ms = run(argv, env)
            if ms is None:
                skipped[who] = n
                print(f"# {NAMES[who]}: {program} with {n} ranks ran past {timeout:.0f} s: killed, "
                      f"skipped from {n} ranks on", flush=True)
                times.pop(who, None)
            elif rep > 0:
                times[who].append(ms)
    return times

def spread(a, b):
    rs = sorted(x / y for x, y in zip(a, b))
    return f"{rs[0]:.2f}-{rs[-1]:.2f}"

rs = results.ResultSet("scaling", variant, cmdline, load=None) if out else None
skipped = {}
before_cols = ["before"] if before_env else []
print(f"{'what':28s} {'sparkrun':>10s} {'Hydra':>10s} {'Open MPI':>10s} {'floor':>8s} {'vs Hydra':>9s} {'runs':>11s}  target"
      + ("   (before: ms, vs Hydra)" if before_env else ""))
targets = {4: 0.3, 32: 1.0, 64: 1.0}
def line(what, t, target):
    med = {w: statistics.median(v) for w, v in t.items() if v}
    cell = lambda w, width=10: f"{med[w]:{width}.1f}" if w in med else "-".rjust(width)
    ratio = med["sparkrun"] / med["hydra"] if "hydra" in med else None
    sp = spread(t["sparkrun"], t["hydra"]) if "hydra" in med else ""
    verdict = "" if target is None or ratio is None else f"<= {target}: " + ("met" if ratio <= target else "NOT met")
    rtext = f"{ratio:9.2f}" if ratio else "-".rjust(9)
    extra = ""
    if "before" in med:
        extra = f"   (before: {med['before']:.1f} ms" + (f", {med['before'] / med['hydra']:.2f}x)" if "hydra" in med else ")")
    print(f"{what:28s} {cell('sparkrun')} {cell('hydra')} {cell('ompi')} {cell('floor', 8)} {rtext} {sp:>11s}  {verdict}{extra}",
          flush=True)
    return med, sp

t = curve("/bin/true", 3, ["sparkrun", "floor"] + [p for p in peers if p == "hydra"], {})
med, sp = line("-n 3 /bin/true", t, 0.75)
if rs:
    if "hydra" in med:
        rs.row("-n 3 /bin/true vs Hydra", "ms", round(med["sparkrun"], 2), "<=", NAMES["hydra"],
               round(med["hydra"], 2), ratio=0.75, spread=sp)
    rs.row("-n 3 /bin/true vs the fork+exec floor", "ms", round(med["sparkrun"], 2), None, NAMES["floor"],
           round(med["floor"], 2))
for n in sizes:
    t = curve("hello", n, ["sparkrun"] + before_cols + peers, skipped)
    med, sp = line(f"hello, {n} ranks", t, targets.get(n))
    if not rs:
        continue
    if "hydra" in med:
        target = targets.get(n)
        rs.row(f"hello with wire-up, {n} ranks vs Hydra", "ms", round(med["sparkrun"], 1),
               "<=" if target else None, NAMES["hydra"], round(med["hydra"], 1), ratio=target, spread=sp)
    if "before" in med and "hydra" in med:
        rs.row(f"hello with wire-up, {n} ranks, libspark before, vs Hydra", "ms", round(med["before"], 1), None,
               NAMES["hydra"], round(med["hydra"], 1))
    if "ompi" in med:
        rs.row(f"hello with wire-up, {n} ranks vs Open MPI", "ms", round(med["sparkrun"], 1), None,
               NAMES["ompi"], round(med["ompi"], 1))
    elif "ompi" in skipped:
        rs.row(f"hello with wire-up, {n} ranks vs Open MPI", "ms", round(med["sparkrun"], 1), None,
               NAMES["ompi"], None, note=f"mpirun skipped: ran past {timeout:.0f} s at {skipped['ompi']} ranks")
if rs:
    rs.data["load"] = f"{os.environ['LOAD_START']} -> {' '.join(open('/proc/loadavg').read().split()[:3])}"
    rs.data["note"] = (f"whole-job wall time, median of {repeats} runs in turn (rotating order) after one "
                       "dropped round; 'runs': the spread of sparkrun / Hydra run by run; rows without "
                       "a target are points of the curve"
                       + (f"; 'libspark before': {os.environ['BEFORE']}/libspark.so.0" if before_env else ""))
    rs.write(out)
PY
