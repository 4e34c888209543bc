#!/bin/bash
# Network-namespace fixture for sparkrun's multi-host tests (docs/multihost.md).
#
#   netns_fixture.sh SCENARIO_SCRIPT [args...]
#
# Creates 3 namespaces named mh<PID>a, mh<PID>b, mh<PID>c (unique per run), each with
# loopback up and one veth into a bridge in the root namespace. Addresses are 10.x only:
# the bridge (root namespace, where the launcher runs) has 10.<S>.<T>.1/24, the namespaces
# .2 .3 .4. Then runs the scenario with these variables exported:
#   MH_HOSTS="mh<PID>a,mh<PID>b,mh<PID>c"  MH_NS1..3  MH_NET=10.S.T.0/24  MH_BRIDGE
#   MH_AGENT='ip netns exec {host}'        MH_VETH1..3 (root-side veth names)
# Everything is removed on exit, also when the scenario fails or is killed (trap).
# Exit 77 (CTest SKIP_RETURN_CODE) when not root or iproute2 is missing.
set -u
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: network namespaces need root and iproute2"
  exit 77
fi
scenario=$1
shift
id=$$
pfx="mh${id}"
export MH_NS1="${pfx}a" MH_NS2="${pfx}b" MH_NS3="${pfx}c"
export MH_HOSTS="$MH_NS1,$MH_NS2,$MH_NS3"
export MH_BRIDGE="${pfx}br"
export MH_AGENT='ip netns exec {host}'
# A /24 derived from the PID; skip ones already in use on this machine.
s=$(( (id / 250) % 250 + 1 )); t=$(( id % 250 + 1 ))
while ip -o -4 addr show | grep -q " 10\.$s\.$t\."; do t=$(( t % 250 + 1 )); done
export MH_NET="10.$s.$t.0/24" MH_LAUNCHER_ADDR="10.$s.$t.1"

cleanup() {
  # Kill anything still running inside our namespaces (no orphans after a failed test).
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$MH_BRIDGE" 2>/dev/null
  for i in 1 2 3; do ip link del "${pfx}v$i" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

set -e
ip link add "$MH_BRIDGE" type bridge
ip addr add "$MH_LAUNCHER_ADDR/24" dev "$MH_BRIDGE"
ip link set "$MH_BRIDGE" up
i=0
for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
  i=$((i + 1))
  ip netns add "$ns"
  ip link add "${pfx}v$i" type veth peer name "${pfx}p$i"
  ip link set "${pfx}p$i" netns "$ns"
  ip link set "${pfx}v$i" master "$MH_BRIDGE" up
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${pfx}p$i" name eth0
  ip -n "$ns" addr add "10.$s.$t.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  export "MH_VETH$i=${pfx}v$i"
  export "MH_ADDR$i=10.$s.$t.$((i + 1))"
done
set +e
# Wait until every link is up and every bridge port forwards (both come up async).
for i in 1 2 3; do
  ns=$(eval echo "\$MH_NS$i")
  for _ in $(seq 100); do
    if ip -n "$ns" link show eth0 | grep -q "state UP" &&
       bridge link show dev "${pfx}v$i" | grep -q "state forwarding"; then break; fi
    sleep 0.05
  done
done
"$scenario" "$@"
