# Runs inside each VM of a 4-ring (vm_mesh.sh --links 1-2,2-3,3-4,1-4): four Sparks without a
# switch, each cabled to two neighbours; the opposite node shares no cable. Node N is rank N-1.
#   node 1: eth0/rxe0 10.60.0.1 (to 2)  eth1/rxe1 10.60.3.1 (to 4)
#   node 2: eth0/rxe0 10.60.0.2 (to 1)  eth1/rxe1 10.60.1.2 (to 3)
#   node 3: eth0/rxe0 10.60.1.3 (to 2)  eth1/rxe1 10.60.2.3 (to 4)
#   node 4: eth0/rxe0 10.60.2.4 (to 3)  eth1/rxe1 10.60.3.4 (to 1)
# The map relays 1 <-> 3 through node 2 and 2 <-> 4 through node 1 (lowest neighbour).
# Cases, one boot (docs/roce.md, "Soft-RoCE scenarios"):
#   1. default transport: neighbours on roce over their cable, the opposite node on roce
#      through the relay (per-peer report; the relays report what they forwarded; RoCE packets
#      on the relaying VMs' links), collectives checked on every rank;
#   2. sub-communicators (issue 18): allreduce_perf --split %2 makes {0, 2} and {1, 3}, the
#      two opposite pairs, whose members reach each other only through a relay; results
#      checked on every member;
#   3. the relay for 1 <-> 3 (rank 1 on node 2) is SIGSTOPped while those sub-communicators
#      run: the waiting ranks name it (the relayed lane) and their communicator.
# The rendezvous (control plane only) reaches node 1 from node 3 through node 2's IP forwarding.
set -u
node=$(cat /etc/spark_node)
rank=$((node - 1))
. /vm_lib.sh
ip=/usr/sbin/ip
case $node in
  1) rv=10.60.0.1; neighbours="10.60.0.2 10.60.3.4"; $ip route add 10.60.1.0/24 via 10.60.0.2 ;;
  2) rv=10.60.0.1; neighbours="10.60.0.1 10.60.1.3"; echo 1 >/proc/sys/net/ipv4/ip_forward ;;
  3) rv=10.60.0.1; neighbours="10.60.1.2 10.60.2.4"; $ip route add 10.60.0.0/24 via 10.60.1.2 ;;
  4) rv=10.60.3.1; neighbours="10.60.2.3 10.60.3.1" ;;
esac
export SPARK_HOST=vm$node SPARKNET_ROCE_TIMEOUT_MS=30000 SPARK_JOIN_TIMEOUT_MS=150000
unset SPARK_TRANSPORT SPARK_LANES SPARK_IB_HCA
job4() { p=$1; shift; env SPARK_RANK=$rank SPARK_SIZE=4 SPARK_RENDEZVOUS=$rv:$p "$@"; }


ring_relay() {
  p0=$(pkts 0) p1=$(pkts 1)
  job4 29601 SPARK_LOG=info:wireup allreduce_perf -b 8 -e 1M -f 32 -n 2 -w 1 >/tmp/ar.out 2>&1
  rc=$?
  cat /tmp/ar.out
  [ $rc -eq 0 ] || return 1
  port=29602
  for c in allgather broadcast alltoall; do
    port=$((port + 1))
    job4 $port allreduce_perf -t $c -b 64 -e 16K -f 256 -n 1 -w 1 >/tmp/c.out 2>&1 ||
      { cat /tmp/c.out; return 1; }
    tail -2 /tmp/c.out
  done
  d0=$(( $(pkts 0) - p0 )) d1=$(( $(pkts 1) - p1 ))
  echo "RoCE packets sent: rxe0 $d0, rxe1 $d1"
  case $node in
    1) expect "[vm1 -> vm3: roce relay via vm2 rxe0(10.60.0.1)->rxe0(10.60.0.2)]" /tmp/ar.out &&
       grep -q "relay on vm1 (rank 0) forwarded [1-9][0-9]* messages for rank 1 <-> rank 3" /tmp/ar.out || return 1 ;;
    2) expect "[vm2 -> vm4: roce relay via vm1 rxe0(10.60.0.2)->rxe0(10.60.0.1)]" /tmp/ar.out &&
       grep -q "relay on vm2 (rank 1) forwarded [1-9][0-9]* messages for rank 0 <-> rank 2" /tmp/ar.out || return 1 ;;
    3) expect "[vm3 -> vm1: roce relay via vm2 rxe0(10.60.1.3)->rxe1(10.60.1.2)]" /tmp/ar.out || return 1 ;;
    4) expect "[vm4 -> vm2: roce relay via vm1 rxe1(10.60.3.4)->rxe1(10.60.3.1)]" /tmp/ar.out || return 1 ;;
  esac
  if grep -q "tcp" /tmp/ar.out; then echo "a pair fell back to tcp"; return 1; fi
  [ $d0 -gt 300 ] && [ $d1 -gt 300 ]
}

# Sub-communicators of the opposite pairs: every message between their members is relayed.
ring_split() {
  job4 29610 allreduce_perf --split %2 -b 8 -e 1M -f 32 -n 2 -w 1 >/tmp/split.out 2>&1
  rc=$?
  cat /tmp/split.out
  [ $rc -eq 0 ] || return 1
  # The first rank of each (world ranks 0 and 1) prints its rows.
  case $node in
    1|2) expect "# allreduce: 2 ranks of 4 in comm 1 (color $rank, size 2)" /tmp/split.out &&
         expect "# wrong results: 0" /tmp/split.out ;;
  esac
}

# Node 2 SIGSTOPs rank 1, which relays 0 <-> 2, while {0, 2} and {1, 3} run allreduces on
# their sub-communicators: ranks 0 and 2 reach each other only through it, so their records
# name the relayed lane "via r1/..." and the sub-communicator; rank 3 waits on rank 1 itself
# (or, once rank 0 has left, on its relay) inside the other one.
stopped_relay() {
  args="--split %2 -b 8 -e 8 -n 1000000 -w 0"
  if [ $node -ne 2 ]; then
    job4 29620 SPARKNET_ROCE_TIMEOUT_MS=3000 allreduce_perf $args >/tmp/stop.out 2>&1
    rc=$?
    grep -a 'rank [0-9]:' /tmp/stop.out | head -3
    [ $rc -ne 0 ] || return 1
    case $node in
      1|3) grep -q "via r1/.*\[comm 1 (color 0, size 2)" /tmp/stop.out ;;
      *) grep -q "\[comm 1 (color 1, size 2)" /tmp/stop.out ;;
    esac
    return
  fi
  p0=$(pkts 0)
  env SPARK_RANK=$rank SPARK_SIZE=4 SPARK_RENDEZVOUS=$rv:29620 SPARKNET_ROCE_TIMEOUT_MS=3000 \
    allreduce_perf $args >/tmp/stop.out 2>&1 &
  pid=$!
  i=0
  while [ $(( $(pkts 0) - p0 )) -lt 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  kill -STOP $pid || return 1
  echo "stopped rank 1 (relay for 0 <-> 2) after $(( $(pkts 0) - p0 )) packets on rxe0"
  sleep 8
  kill -KILL $pid
  wait $pid
  return 0
}

# Node 4 reaches the rendezvous (node 1) over its own cable.
run peer_up reachable $neighbours $([ $node -eq 4 ] || echo 10.60.0.1)
[ $failed -eq 0 ] || exit 1
run ring_default_roce_relay ring_relay
run ring_split_relayed ring_split
run ring_stopped_relay_split stopped_relay
exit $failed
