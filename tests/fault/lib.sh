# Shared by the fault scripts: fail/pass, a job-unique marker, no leftover processes.
fail() { echo "FAIL: $*"; exit 1; }
# Processes whose command line holds the marker (the ranks get it as an argument).
leftovers() { pgrep -f -- "$1" | grep -vx "$$" || true; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
