#!/usr/bin/env bash
# Launch time: `-n 3 /bin/true` under sparkrun, Open MPI's mpirun and MPICH's Hydra, in
# one hyperfine run (the machine is noisy: only figures from one run compare). Prints the
# medians and sparkrun's ratio to each. Not a pass/fail test.
#   bench/launch.sh [--json FILE] [--variant quiet|loaded] [build-dir] [extra hyperfine args...]
# --json FILE also writes the target rows as one result set for bench/report (bench/README.md).
set -euo pipefail
json= variant=quiet cmdline="bench/launch.sh $*"
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --variant) variant=$2; shift 2 ;;
    *) break ;;
  esac
done
cd "$(dirname "$0")/.."
build=${1:-${SPARK_BUILD_DIR:-build}}
shift || true
sparkrun=$build/launcher/sparkrun
[[ -x $sparkrun ]] || { echo "bench/launch.sh: $sparkrun not built (run scripts/build)" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "bench/launch.sh: hyperfine missing (apt-get install hyperfine)" >&2; exit 1; }

names=(sparkrun)
cmds=("$sparkrun -n 3 /bin/true")
if command -v mpirun.openmpi >/dev/null; then
  names+=(mpirun)
  cmds+=("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun.openmpi --oversubscribe -n 3 /bin/true")
fi
if command -v mpiexec.hydra >/dev/null; then
  names+=(hydra)
  cmds+=("mpiexec.hydra -n 3 /bin/true")
fi

out=$json
json=$(mktemp)
trap 'rm -f "$json"' EXIT
args=()
for i in "${!cmds[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
hyperfine -N --warmup 3 --min-runs 30 --export-json "$json" "$@" "${args[@]}"

python3 - "$json" "$out" "$variant" "$cmdline" <<'PY'
import json, sys
sys.dont_write_bytecode = True
sys.path.insert(0, "bench")
import results
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
rs = results.ResultSet("launch", sys.argv[3], sys.argv[4]) if sys.argv[2] else None
med = {k: v["median"] * 1000 for k, v in res.items()}
print()
for k, v in med.items():
    print(f"{k:10s} median {v:8.1f} ms   mean {res[k]['mean']*1000:8.1f} ms")
s = med.get("sparkrun")
for other, target in (("mpirun", "<= 0.25"), ("hydra", "<= 1.0")):
    if s and other in med:
        print(f"sparkrun / {other:7s} = {s / med[other]:.2f}   (target {target})")
        if rs:
            rs.row(f"-n 3 /bin/true vs {other}", "ms", s, "<=", other, med[other], ratio=float(target.split()[1]))
if rs:
    rs.write(sys.argv[2])
PY
