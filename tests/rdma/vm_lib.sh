# Sourced by every script that runs inside a test VM (vm_run.sh puts it at /vm_lib.sh): the
# case runner and the checks the scenarios share. /bin/sh (busybox), no bashisms.
failed=0
# run NAME CMD...: one case with its PASS/FAIL line and time; failures count in $failed.
run() {
  name=$1; shift
  echo "=== $name: $*"
  t0=$(date +%s)
  if "$@"; then echo "=== $name: PASS ($(( $(date +%s) - t0 )) s)"; else echo "=== $name: FAIL"; failed=$((failed+1)); fi
}
# gtest NAME PROGRAM FILTER [ARGS...]: PROGRAM's tests that FILTER selects, as one case; a
# filter that selects no test fails (gtest itself exits 0 on an empty selection).
gtest() {
  name=$1 prog=$2 filter=$3; shift 3
  selected=$("$prog" --gtest_list_tests --gtest_filter="$filter" | grep -c '^  ')
  if [ "$selected" -eq 0 ]; then
    echo "=== $name: FAIL: --gtest_filter='$filter' selects no test of $prog"
    failed=$((failed+1))
    return
  fi
  echo "=== $name: $selected tests"
  run "$name" "$prog" --gtest_filter="$filter" "$@"
}
# expect TEXT FILE: FILE holds TEXT; else say what is missing and show FILE.
expect() { grep -qF -- "$1" "$2" || { echo "missing in $2: $1"; cat "$2"; return 1; }; }
# pkts N: RoCE packets rxeN has sent so far.
pkts() { cat /sys/class/infiniband/rxe$1/ports/1/hw_counters/sent_pkts; }
# reachable ADDR...: waits until every address answers a ping (the other VMs boot at their
# own pace), at most 150 tries each.
reachable() {
  for a in "$@"; do
    i=0
    until ping -c 1 -W 1 "$a" >/dev/null 2>&1; do
      i=$((i + 1))
      [ $i -lt 150 ] || { echo "no answer from $a"; return 1; }
    done
  done
}
