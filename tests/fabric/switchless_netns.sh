# Sourced by the network-namespace tests of switchless fabrics (tests/fabric/fabric_netns.sh,
# tests/rdma/doctor_netns.sh). Set before calling: pfx (a unique name prefix, e.g. "fb$$"),
# n (nodes), cables ("0-1 1-2 ...": a-b means port "to<b>" on a, "to<a>" on b; a second cable
# between the same pair is "to<b>b" / "to<a>b").
#
#   switchless_pick_subnet   sets s: the second octet of a 10.s.0.0/16 no interface uses yet
#   switchless_up            namespaces $pfx0..$pfx<n-1>, one veth pair per cable in its own
#                            10.s.<k>.0/30 (no bridge), plus a control veth per namespace into
#                            the root-namespace bridge ${pfx}br (10.s.200.0/24, the launcher's
#                            side); sets hosts="$pfx0,...". Data lanes: SPARK_DATA_NET=10.s.0.0/17.
#   switchless_down          kills what runs in the namespaces, removes them and the bridge.

switchless_pick_subnet() {
  s=$(($$ % 200 + 20))
  while ip -o -4 addr show | grep -q " 10\.$s\."; do s=$(((s + 1) % 250 + 1)); done
}

switchless_up() {
  ip link add "${pfx}br" type bridge &&
    ip addr add "10.$s.200.1/24" dev "${pfx}br" &&
    ip link set "${pfx}br" up || return 1
  hosts=""
  local i ns a b k=0
  for i in $(seq 0 $((n - 1))); do
    ns=$pfx$i
    ip netns add "$ns" &&
      ip -n "$ns" link set lo up &&
      ip link add "${pfx}c$i" type veth peer name "${pfx}q$i" &&
      ip link set "${pfx}q$i" netns "$ns" &&
      ip link set "${pfx}c$i" master "${pfx}br" up &&
      ip -n "$ns" link set "${pfx}q$i" name ctl &&
      ip -n "$ns" addr add "10.$s.200.$((i + 2))/24" dev ctl &&
      ip -n "$ns" link set ctl up || return 1
    hosts="$hosts${hosts:+,}$ns"
  done
  local second
  for c in $cables; do
    a=${c%-*} b=${c#*-}
    k=$((k + 1))
    second=""
    ip -n "$pfx$a" link show "to$b" >/dev/null 2>&1 && second=b
    # port "to<b>" of a to port "to<a>" of b (a Spark's two QSFP ports): names say the peer.
    ip link add "${pfx}x$k" type veth peer name "${pfx}y$k" &&
      ip link set "${pfx}x$k" netns "$pfx$a" &&
      ip link set "${pfx}y$k" netns "$pfx$b" &&
      ip -n "$pfx$a" link set "${pfx}x$k" name "to$b$second" &&
      ip -n "$pfx$b" link set "${pfx}y$k" name "to$a$second" &&
      ip -n "$pfx$a" addr add "10.$s.$k.1/30" dev "to$b$second" &&
      ip -n "$pfx$b" addr add "10.$s.$k.2/30" dev "to$a$second" &&
      ip -n "$pfx$a" link set "to$b$second" up &&
      ip -n "$pfx$b" link set "to$a$second" up || return 1
  done
  # The bridge forwards only after its ports left the learning state (bounded wait).
  for i in $(seq 0 $((n - 1))); do
    for _ in $(seq 100); do
      bridge link show dev "${pfx}c$i" | grep -q "state forwarding" && break
      sleep 0.05
    done
  done
}

switchless_down() {
  local i pid
  for i in $(seq 0 $((n - 1))); do
    for pid in $(ip netns pids "$pfx$i" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$pfx$i" 2>/dev/null
  done
  ip link del "${pfx}br" 2>/dev/null
}
