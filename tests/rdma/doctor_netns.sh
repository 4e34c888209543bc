#!/bin/bash
# `sparkrun doctor` across hosts: a 4-node switchless ring on network namespaces (docs/doctor.md).
#
#   doctor_netns.sh SPARKRUN
#
# Four namespaces, one veth pair per cable (0-1 1-2 2-3 3-0), each cable its own /30, no bridge;
# a control veth per namespace into a bridge in the root namespace where the launcher runs
# (kept out of the data lanes by SPARK_DATA_NET). No RDMA here, so the round trips are tcp:
# every cable must show an ok "tcp round trip" row, neighbours a direct reach row on their
# cable, opposite nodes a relay row (0-2 via 1, 1-3 via 0), and the job exits 2 (no RDMA
# device is a FAIL). Exit 77 (skip) without root/iproute2. Everything is removed on exit.
set -u
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: network namespaces need root and iproute2"; exit 77
fi
sparkrun=$1
n=4 cables="0-1 1-2 2-3 3-0"
pfx="dr$$"
. "$(dirname "$0")/../fabric/switchless_netns.sh"
switchless_pick_subnet
out=$(mktemp -d)
cleanup() {
  switchless_down
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() { echo "FAIL: $*"; cat "$out/o"; exit 1; }
expect() { grep -Eq -- "$1" "$out/o" || fail "missing /$1/"; }

switchless_up || fail "could not build the namespaces"

t0=$(date +%s)
"$sparkrun" doctor --launch-agent 'ip netns exec {host}' --control-net "10.$s.200.0/24" \
  -n $n --host "$hosts" -x "SPARK_DATA_NET=10.$s.0.0/17" --iters 4 >"$out/o" 2>&1
rc=$?
cat "$out/o"
[ $rc -eq 2 ] || fail "exit $rc, expected 2 (no RDMA device here)"
for i in $(seq 0 $((n - 1))); do expect "^$pfx$i +$i +lanes "; done
[ "$(grep -c 'library  *PMIx' "$out/o")" -eq $n ] || fail "expected the host checks once per host"
# Every cable: one ok tcp round trip from the lower rank, on the interfaces named after the peer.
expect "^${pfx}0 +0 +tcp round trip +tcp:to1->to0 +rank 1 \(${pfx}1\) +ok "
expect "^${pfx}0 +0 +tcp round trip +tcp:to3->to0 +rank 3 \(${pfx}3\) +ok "
expect "^${pfx}1 +1 +tcp round trip +tcp:to2->to1 +rank 2 \(${pfx}2\) +ok "
expect "^${pfx}2 +2 +tcp round trip +tcp:to3->to2 +rank 3 \(${pfx}3\) +ok "
[ "$(grep -c 'tcp round trip' "$out/o")" -eq 4 ] || fail "expected exactly 4 round trip rows (one per cable)"
grep -q "tcp:ctl" "$out/o" && fail "control interface used as a data lane"
# Reach: neighbours direct on their cable, opposite nodes through the relay.
expect "^${pfx}0 +0 +reach +tcp:to1 +rank 1 \(${pfx}1\) +ok +- +direct on 1 lane"
expect "^${pfx}0 +0 +reach +- +rank 2 \(${pfx}2\) +info +- +no direct lane: relay via rank 1 \(${pfx}1\) \(2 hops\)"
expect "^${pfx}1 +1 +reach +- +rank 3 \(${pfx}3\) +info +- +no direct lane: relay via rank 0 \(${pfx}0\) \(2 hops\)"
expect "^${pfx}2 +2 +reach +tcp:to3 +rank 3 \(${pfx}3\) +ok "
grep -q "UNREACHABLE" "$out/o" && fail "a rank was unreachable"
echo "PASS doctor ring ($(( $(date +%s) - t0 )) s)"
