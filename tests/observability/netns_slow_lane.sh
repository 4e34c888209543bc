#!/bin/bash
# The slow-lane warning (docs/observability.md) on 2 "hosts" (network namespaces) joined by two
# cables, each a tcp lane of the pair (SPARK_DATA_NET; SPARK_TCP_LANES=2: one connection per
# cable), the ranks streaming 4 MiB allreduces (whole pieces: the lanes take turns):
# 1. both cables clean: no slow-lane warning;
# 2. the second cable policed to 2 MB/s into host 1 (an iptables hashlimit: this kernel has no
#    tbf or netem qdisc): one warning naming that lane (tcp:to1b or its other end tcp:to0b) with
#    its figures, none naming the first cable, and `sparkrun status` showing both lanes' bytes.
#   netns_slow_lane.sh SPARKRUN OBSERVE_RANK
# Bounded (each job at most 40 s); exit 77 (skip) without root, iproute2 or iptables; the
# namespaces, their rules and the bridge are removed on every exit.
set -u
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then
  echo "SKIP: network namespaces and iptables need root, iproute2 and iptables"; exit 77
fi
sparkrun=$1 rank=$2
n=2 cables="0-1 0-1"
pfx="sl$$"
. "$(dirname "$0")/../fabric/switchless_netns.sh"
switchless_pick_subnet
out=$(mktemp -d)
job=
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2>/dev/null
  switchless_down  # the iptables rules live in the namespaces and go with them
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() { echo "FAIL: $*"; cat "$out/o" 2>/dev/null; exit 1; }
switchless_up || fail "could not build the namespaces"
run() {  # run SECONDS: a job streaming for SECONDS, in the background ($job)
  SPARK_REPORT_DIR=$out timeout -k 5 40 "$sparkrun" --launch-agent 'ip netns exec {host}' \
    --control-net "10.$s.200.0/24" -n 2 --host "$hosts" -x "SPARK_DATA_NET=10.$s.0.0/17" \
    -x SPARK_TRANSPORT=tcp -x SPARK_TCP_LANES=2 "$rank" wide "$1" >"$out/o" 2>&1 &
  job=$!
}
finish() {
  wait "$job"
  local rc=$?
  job=
  cat "$out/o"
  [ "$rc" -eq 0 ] || fail "the job exited $rc"
}
t0=$(date +%s)

# 1. Clean cables: no warning.
run 6
finish
grep -q "slow lane" "$out/o" && fail "clean cables: a slow-lane warning"

# 2. Host 1's arrivals on its second cable policed.
ip netns exec "${pfx}1" iptables -A INPUT -i to0b -p tcp -m hashlimit --hashlimit-above 2mb/s \
  --hashlimit-burst 3mb --hashlimit-mode dstip --hashlimit-name "${pfx}p" -j DROP ||
  fail "could not add the policer"
run 12
for _ in $(seq 100); do grep -q READY "$out/o" && break; sleep 0.1; done
sleep 2
ours=" $(ip netns pids "${pfx}0") $(ip netns pids "${pfx}1") "
jobid=$("$sparkrun" status --list --json | python3 -c '
import json, sys
ours = sys.argv[1].split()
for j in json.load(sys.stdin):
    if str(j["launcher_pid"]) in ours:
        print(j["job"]); break' "$ours")
[ -n "$jobid" ] || fail "sparkrun status --list shows no node runner of this job"
"$sparkrun" status "$jobid" --json >"$out/s.json" || fail "sparkrun status --json failed"
"$sparkrun" status "$jobid"
finish
python3 - "$out/s.json" <<'PY' || fail "status lanes"
import json, sys
rows = {r["rank"]: r for r in json.load(open(sys.argv[1]))["ranks"]}
lanes = {l["lane"]: l for l in rows[0].get("lanes", [])}
assert sorted(lanes) == ["tcp:to1", "tcp:to1b"], f"rank 0's lanes: {rows[0].get('lanes')}"
assert all(l["peer"] == 1 and l["bytes_sent"] > 0 for l in lanes.values()), lanes
PY
warnings=$(grep "slow lane" "$out/o")
[ "$(echo "$warnings" | grep -c .)" -ge 1 ] || fail "policed: no slow-lane warning"
echo "$warnings" | grep -Eqv "slow lane tcp:to[01]b of rank" && fail "a warning names another lane"
echo "$warnings" | grep -Eq "slow lane tcp:to1b of rank 0 \(host ${pfx}0\) to rank 1|slow lane tcp:to0b of rank 1 \(host ${pfx}1\) to rank 0" ||
  fail "the warning does not name the policed lane with host and rank"
echo "$warnings" | grep -Eq "over the last 3 s it carried [0-9.]+ MB in [0-9.]+ s busy \([0-9]+%\), [0-9.]+ MB/s, its sibling lanes to that peer tcp:to[01] [0-9.]+ MB in [0-9.]+ s busy" ||
  fail "the warning lacks its figures"
echo "PASS slow lane ($(( $(date +%s) - t0 )) s)"
