#!/usr/bin/env bash
# The long soak (the suite's fault.soak runs 24 jobs, 3 at a time): consecutive and
# concurrent 3-rank jobs with random kills and stops of ranks and of sparkrun, over shm and
# tcp; the counts and leftovers go to docs/reliability.md.
#   bench/soak.sh [BUILD_DIR] [JOBS] [CONCURRENT] [SEED]
set -u
cd "$(dirname "$0")/.."
build=${1:-build} jobs=${2:-300} conc=${3:-4} seed=${4:-1}
exec bash tests/fault/soak.sh "$build/launcher/sparkrun" "$build/tests/fault/fault_stream" \
  "$jobs" "$conc" "$seed"
