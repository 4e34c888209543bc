#!/bin/bash
# `sparkrun doctor --bandwidth` across hosts: a triangle of network namespaces (docs/doctor.md,
# "Qualifying a new cable"). No RDMA here, so the streams are tcp over the veth cables.
#
#   doctor_bandwidth_netns.sh SPARKRUN SCHEMA
#
# 1. Clean cables, --json: the document validates against the schema; every cable has an ok
#    entry each way whose interface counters show at least its payload; exit 2 (the host
#    checks FAIL: no RDMA device).
# 2. One direction of one cable policed with an iptables hashlimit (4 MB/s) (this kernel has no tbf or
#    netem): the table's first lines name that cable and direction FAIL, the other five are ok.
# 3. One end of a cable at MTU 1500 (the others 9000): a path MTU FAIL row naming both ends
#    and values; without it, none.
# Bounded: each cable at most 2 x (--seconds + 1) s. Exit 77 (skip) without root, iproute2 or
# iptables. Everything (namespaces, rules) is removed on exit.
set -u
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then
  echo "SKIP: network namespaces and iptables need root, iproute2 and iptables"; exit 77
fi
sparkrun=$1 schema=$2
n=3 cables="0-1 1-2 2-0"
pfx="db$$"
. "$(dirname "$0")/../fabric/switchless_netns.sh"
switchless_pick_subnet
out=$(mktemp -d)
cleanup() {
  switchless_down  # the iptables rules live in the namespaces and go with them
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() { echo "FAIL: $*"; cat "$out/o"; exit 1; }
switchless_up || fail "could not build the namespaces"
for i in 0 1 2; do
  for d in $(ip -n "$pfx$i" -o link show | sed -n 's/^[0-9]*: \(to[0-9]\)@.*/\1/p'); do
    ip -n "$pfx$i" link set "$d" mtu 9000
  done
done
doctor() {
  "$sparkrun" doctor --launch-agent 'ip netns exec {host}' --control-net "10.$s.200.0/24" \
    -n $n --host "$hosts" -x "SPARK_DATA_NET=10.$s.0.0/17" --iters 2 "$@" >"$out/o" 2>"$out/e"
}

# 1. Clean: JSON, schema, counters.
t0=$(date +%s)
doctor --bandwidth --seconds 1 --link-gbps 0.4 --json; rc=$?
(( $(date +%s) - t0 <= 6 * 2 * 2 + 20 )) || fail "clean run took $(( $(date +%s) - t0 )) s"
[ $rc -eq 2 ] || fail "clean: exit $rc, expected 2 (no RDMA device is a FAIL row) $(cat "$out/e")"
python3 - "$schema" "$out/o" <<'PY' || fail "clean: the JSON document"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
jsonschema.validate(doc, schema)
assert doc["mode"] == "bandwidth" and doc["ranks"] == 3, doc["mode"]
cables = doc["cables"]
assert len(cables) == 6, f"{len(cables)} cable directions, expected 6"
for c in cables:
    assert c["result"] == "ok", c
    assert c["payload_bytes"] > 0 and c["gbps"] > 0, c
    # the bytes left and arrived on the lane's own interfaces (tcp adds headers: >= payload)
    assert c["tx_bytes"] >= c["payload_bytes"] and c["rx_bytes"] >= c["payload_bytes"], c
    assert c["tx_netdev"].startswith("to") and c["rx_netdev"].startswith("to"), c
    assert c["reference"] == "--link-gbps", c
mtu = [r for r in doc["rows"] if r["check"] == "path MTU"]
assert len(mtu) == 3 and all(r["result"] == "ok" for r in mtu), mtu
assert doc["exit_code"] == 2
print("clean: 6 directions ok, counters cover the payload, schema valid")
PY

# 2. Police the cable 0-1 in the direction 0 -> 1 (arrivals on host 1's "to0") at 4 MB/s.
ip netns exec "${pfx}1" iptables -A INPUT -i to0 -p tcp -m hashlimit --hashlimit-above 4mb/s \
  --hashlimit-burst 5mb --hashlimit-mode dstip --hashlimit-name "${pfx}p" -j DROP ||
  fail "could not add the policer"
doctor --bandwidth --seconds 1 --link-gbps 0.4; rc=$?
cat "$out/o"
[ $rc -eq 2 ] || fail "policed: exit $rc, expected 2"
grep -Eq "^  FAIL +rank 0 \(${pfx}0\) -> rank 1 \(${pfx}1\) +tcp:to1->to0 " "$out/o" ||
  fail "policed: no FAIL summary line for rank 0 -> rank 1 on tcp:to1->to0"
[ "$(grep -Ec '^  ok +rank' "$out/o")" -eq 5 ] || fail "policed: expected the 5 other directions ok"
grep -Eq "^${pfx}0 +0 +bandwidth +tcp:to1->to0 +rank 1 \(${pfx}1\) +FAIL .*below 50 %" "$out/o" ||
  fail "policed: no FAIL bandwidth row"
ip netns exec "${pfx}1" iptables -F INPUT

# 3. Host 2's "to0" (the cable 2-0) at 1500: a path MTU FAIL naming both ends.
ip -n "${pfx}2" link set to0 mtu 1500
doctor; rc=$?
cat "$out/o"
[ $rc -eq 2 ] || fail "mtu: exit $rc, expected 2"
grep -Eq "path MTU .*FAIL .*MTU differs: ${pfx}2 to0 1500, ${pfx}0 to2 9000|path MTU .*FAIL .*MTU differs: ${pfx}0 to2 9000, ${pfx}2 to0 1500" "$out/o" ||
  fail "mtu: no FAIL row naming both ends and values"
[ "$(grep -c 'path MTU.* ok ' "$out/o")" -eq 2 ] || fail "mtu: the two other cables must be ok"
echo "PASS doctor bandwidth ($(( $(date +%s) - t0 )) s)"
