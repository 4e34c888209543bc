# Runs inside each VM of a triangle (vm_mesh.sh --links 1-2,1-3,2-3): three Sparks without a
# switch, port 0 of each to one neighbour and port 1 to the other. Node N is rank N-1.
#   node 1: eth0/rxe0 10.60.0.1 (to node 2)   eth1/rxe1 10.60.1.1 (to node 3)
#   node 2: eth0/rxe0 10.60.0.2 (to node 1)   eth1/rxe1 10.60.2.2 (to node 3)
#   node 3: eth0/rxe0 10.60.1.3 (to node 1)   eth1/rxe1 10.60.2.3 (to node 2)
# Cases, one boot (docs/roce.md, "Soft-RoCE scenarios"):
#   1. default transport: every pair on roce over its own cable (per-peer report; packets on
#      every rxe link), collectives checked on every rank;
#   1b. sub-communicators on direct roce lanes (issue 18): --split %2 makes {0, 2} (one
#      cable, vm1 rxe1 <-> vm3 rxe0) and {1}; the pair's allreduces are checked and its
#      packets go over that cable, not over node 1's other one;
#   2. the plan prefers port 0 (SPARK_LANES=rxe0 on node 1) for a job with node 3, which is
#      cabled to port 1: the map wins, the job runs on rxe1 (and not on rxe0);
#   3. a stopped rank (node 3) is named by both neighbours' records;
#   4. a cable that goes down mid-job (node 3's eth1, to node 2): the records of ranks 1 and 2
#      name the peer and the lane rxe1;
#   5. `sparkrun doctor`'s program across the three VMs: its "roce lanes" rows are the job's
#      per-peer choice of case 1 (the same function, fabric/roce_lanes);
#   6. node 3 without its RDMA device on the cable to node 2 (rxe1 deleted): a job of nodes 2
#      and 3 runs on tcp, and rank 0 says once which pair and why;
#   7. RoCE dropped on that cable (tc drops UDP 4791 arriving at node 3's eth1; tcp still crosses):
#      both lanes exist but every RDMA WRITE probe fails, so the pair falls back to tcp, with
#      rank 0's note naming the pair and the probe's failure;
#   8. `sparkrun doctor --bandwidth`'s program: an RDMA WRITE stream each way on every cable,
#      RoCE leaving node 1 on its cable to node 2 shaped to 4 Mbit/s (tc prio + tbf on UDP 4791;
#      the rendezvous on that cable is left alone): that direction FAILs by name, the five
#      others are ok (their interface counters cover the payload); node 3's eth1 at MTU 1200:
#      a path MTU FAIL row naming both ends and values.
set -u
node=$(cat /etc/spark_node)
rank=$((node - 1))
. /vm_lib.sh
case $node in
  1) rv=10.60.0.1; neighbours="10.60.0.2 10.60.1.3" ;;
  2) rv=10.60.0.1; neighbours="10.60.0.1 10.60.2.3" ;;
  3) rv=10.60.1.1; neighbours="10.60.1.1 10.60.2.2" ;;
esac
export SPARK_HOST=vm$node SPARKNET_ROCE_TIMEOUT_MS=30000 SPARK_JOIN_TIMEOUT_MS=150000
unset SPARK_TRANSPORT SPARK_LANES SPARK_IB_HCA
# job3 PORT [VAR=value...] PROGRAM ARGS: this node's rank of a 3-rank job (env execs it, so a
# background job's $! is the rank's pid).
job3() { p=$1; shift; env SPARK_RANK=$rank SPARK_SIZE=3 SPARK_RENDEZVOUS=$rv:$p "$@"; }


# 1. Default transport: roce to both neighbours, each on its own cable.
default_roce() {
  p0=$(pkts 0) p1=$(pkts 1)
  job3 29501 SPARK_LOG=info:wireup allreduce_perf -b 8 -e 2M -f 32 -n 2 -w 1 >/tmp/ar.out 2>&1
  rc=$?
  cat /tmp/ar.out
  [ $rc -eq 0 ] || return 1
  port=29502
  for c in allgather reduce_scatter broadcast alltoall; do
    port=$((port + 1))
    job3 $port allreduce_perf -t $c -b 64 -e 16K -f 256 -n 1 -w 1 >/tmp/c.out 2>&1 ||
      { cat /tmp/c.out; return 1; }
    tail -3 /tmp/c.out
  done
  d0=$(( $(pkts 0) - p0 )) d1=$(( $(pkts 1) - p1 ))
  echo "RoCE packets sent: rxe0 $d0, rxe1 $d1"
  case $node in
    1) expect " wireup: rank 0 -> rank 1: roce [vm1 -> vm2: roce rxe0(10.60.0.1)->rxe0(10.60.0.2)]" /tmp/ar.out &&
       expect " wireup: rank 0 -> rank 2: roce [vm1 -> vm3: roce rxe1(10.60.1.1)->rxe0(10.60.1.3)]" /tmp/ar.out || return 1 ;;
    2) expect " wireup: rank 1 -> rank 0: roce [vm2 -> vm1: roce rxe0(10.60.0.2)->rxe0(10.60.0.1)]" /tmp/ar.out &&
       expect " wireup: rank 1 -> rank 2: roce [vm2 -> vm3: roce rxe1(10.60.2.2)->rxe1(10.60.2.3)]" /tmp/ar.out || return 1 ;;
    3) expect " wireup: rank 2 -> rank 0: roce [vm3 -> vm1: roce rxe0(10.60.1.3)->rxe1(10.60.1.1)]" /tmp/ar.out &&
       expect " wireup: rank 2 -> rank 1: roce [vm3 -> vm2: roce rxe1(10.60.2.3)->rxe1(10.60.2.2)]" /tmp/ar.out || return 1 ;;
  esac
  if grep -q "tcp" /tmp/ar.out; then echo "a pair fell back to tcp"; return 1; fi
  [ $d0 -gt 300 ] && [ $d1 -gt 300 ]
}

# 1b. Sub-communicators on direct roce lanes: {0, 2} and {1} (alone).
split_direct() {
  p0=$(pkts 0) p1=$(pkts 1)
  job3 29509 allreduce_perf --split %2 -b 8 -e 1M -f 32 -n 2 -w 1 >/tmp/sd.out 2>&1
  rc=$?
  cat /tmp/sd.out
  [ $rc -eq 0 ] || return 1
  d0=$(( $(pkts 0) - p0 )) d1=$(( $(pkts 1) - p1 ))
  echo "RoCE packets sent: rxe0 $d0, rxe1 $d1"
  # The first rank of each group (world ranks 0 and 1) prints its rows.
  case $node in
    1) expect "# allreduce: 2 ranks of 3 in comm 1 (color 0, size 2), transport roce" /tmp/sd.out &&
       expect "# wrong results: 0" /tmp/sd.out && [ $d1 -gt 100 ] ;;
    2) expect "# allreduce: 1 ranks of 3 in comm 1 (color 1, size 1)" /tmp/sd.out &&
       expect "# wrong results: 0" /tmp/sd.out ;;
  esac
}

# 2. The binding plan prefers port 0 on node 1, but node 3 is cabled to its port 1.
map_wins() {
  [ $node -eq 2 ] && return 0  # not in this job
  r=0; [ $node -eq 3 ] && r=1
  pre=""; [ $node -eq 1 ] && pre=SPARK_LANES=rxe0
  p0=$(pkts 0) p1=$(pkts 1)
  env $pre SPARK_LOG=info:wireup SPARK_RANK=$r SPARK_SIZE=2 \
    SPARK_RENDEZVOUS=10.60.1.1:29510 allreduce_perf -b 8 -e 256K -f 8 -n 2 -w 1 >/tmp/mw.out 2>&1
  rc=$?
  cat /tmp/mw.out
  [ $rc -eq 0 ] || return 1
  d0=$(( $(pkts 0) - p0 )) d1=$(( $(pkts 1) - p1 ))
  echo "RoCE packets sent: rxe0 $d0, rxe1 $d1"
  if [ $node -eq 1 ]; then
    expect " wireup: rank 0 -> rank 1: roce [vm1 -> vm3: roce rxe1(10.60.1.1)->rxe0(10.60.1.3) (map wins: SPARK_LANES=rxe0 of vm1 does not reach vm3; the fabric map's lanes used)]" /tmp/mw.out || return 1
    [ $d1 -gt 200 ] && [ $d0 -lt 50 ]
  else
    [ $d0 -gt 200 ]
  fi
}

# 3. Node 3 SIGSTOPs its rank once RDMA traffic flows: both neighbours name rank 2.
stopped_rank() {
  args="-b 8 -e 8 -n 1000000 -w 0"
  if [ $node -ne 3 ]; then
    job3 29520 SPARKNET_ROCE_TIMEOUT_MS=3000 allreduce_perf $args >/tmp/stop.out 2>&1
    rc=$?
    grep -a 'rank [0-9]:' /tmp/stop.out | head -3
    # This rank names rank 2, or it had already finished that call and waits on the other
    # neighbour, which named rank 2 and left (its own record, in its VM's console).
    [ $rc -ne 0 ] && grep -q "seq [0-9]* step [0-9]*: \(no data from rank 2 on lane rxe1 after\|rank $((1 - rank)) closed its connection\)" /tmp/stop.out
    return
  fi
  p0=$(pkts 0)
  env SPARK_RANK=$rank SPARK_SIZE=3 SPARK_RENDEZVOUS=$rv:29520 SPARKNET_ROCE_TIMEOUT_MS=3000 \
    allreduce_perf $args >/tmp/stop.out 2>&1 &
  pid=$!
  i=0
  while [ $(( $(pkts 0) - p0 )) -lt 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  kill -STOP $pid || return 1
  echo "stopped rank 2 after $(( $(pkts 0) - p0 )) packets on rxe0"
  sleep 8  # the neighbours give up after 3 s
  kill -KILL $pid
  wait $pid
  return 0
}

# 4. Node 3 pulls its cable to node 2 (eth1 down) mid-job: ranks 1 and 2 name each other and
#    the lane; rank 0 ends too (its own deadline or the abort).
cable_down() {
  args="-b 8 -e 8 -n 1000000 -w 0"
  env SPARK_RANK=$rank SPARK_SIZE=3 SPARK_RENDEZVOUS=$rv:29530 SPARKNET_ROCE_TIMEOUT_MS=3000 \
    allreduce_perf $args >/tmp/down.out 2>&1 &
  pid=$!
  if [ $node -eq 3 ]; then
    p1=$(pkts 1)
    i=0
    while [ $(( $(pkts 1) - p1 )) -lt 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    /usr/sbin/ip link set eth1 down
    echo "eth1 down after $(( $(pkts 1) - p1 )) packets on rxe1"
  fi
  wait $pid
  rc=$?
  [ $node -eq 3 ] && /usr/sbin/ip link set eth1 up
  grep -a 'rank [0-9]:' /tmp/down.out | head -3
  [ $rc -ne 0 ] || return 1
  case $node in
    2) grep -q "rank 2 .*on lane rxe1" /tmp/down.out ;;
    3) grep -q "rank 1 .*on lane rxe1" /tmp/down.out ;;
    *) return 0 ;;
  esac
}

# 5. The doctor's per-peer roce lanes: the rows rank 0 prints (node 1) are case 1's choices.
doctor_roce_lanes() {
  job3 29540 SPARK_LOG=error spark_doctor_probe --iters 2 --probe-timeout-ms 10000 >/tmp/doc.out 2>&1
  [ $node -eq 1 ] || return 0
  cat /tmp/doc.out
  for want in "1 (vm2) .*vm1 -> vm2: roce rxe0(10.60.0.1)->rxe0(10.60.0.2)$" \
              "2 (vm3) .*vm1 -> vm3: roce rxe1(10.60.1.1)->rxe0(10.60.1.3)$" \
              "0 (vm1) .*vm2 -> vm1: roce rxe0(10.60.0.2)->rxe0(10.60.0.1)$" \
              "2 (vm3) .*vm2 -> vm3: roce rxe1(10.60.2.2)->rxe1(10.60.2.3)$" \
              "0 (vm1) .*vm3 -> vm1: roce rxe0(10.60.1.3)->rxe1(10.60.1.1)$" \
              "1 (vm2) .*vm3 -> vm2: roce rxe1(10.60.2.3)->rxe1(10.60.2.2)$"; do
    grep -q "roce lanes .*rank $want" /tmp/doc.out || { echo "no roce lanes row: rank $want"; return 1; }
  done
}

# 6. Node 3 loses its RDMA device on eth1: nodes 2 and 3 share a cable but no RDMA lane, so a
#    job of the two runs on tcp over that cable, and rank 0 (node 2) notes the pair and why.
no_rdma_lane() {
  [ $node -eq 1 ] && return 0  # not in this job
  [ $node -eq 3 ] && { /usr/sbin/rdma link delete rxe1 || return 1; sleep 1; }
  env SPARK_LOG=info:wireup SPARK_RANK=$((node - 2)) SPARK_SIZE=2 \
    SPARK_RENDEZVOUS=10.60.2.2:29550 allreduce_perf -b 8 -e 256K -f 8 -n 2 -w 1 >/tmp/nl.out 2>&1
  rc=$?
  [ $node -eq 3 ] && /usr/sbin/rdma link add rxe1 type rxe netdev eth1
  cat /tmp/nl.out
  [ $rc -eq 0 ] || return 1
  if [ $node -eq 2 ]; then
    expect "wireup: note: vm2 -> vm3: tcp, no RDMA lane of vm2 shares a subnet with vm3, not even through a relay" /tmp/nl.out &&
      expect "wireup: rank 0 -> rank 1: tcp [vm2 -> vm3: tcp, no RDMA lane" /tmp/nl.out || return 1
    [ "$(grep -c 'wireup: note:' /tmp/nl.out)" -eq 1 ] || { echo "not one note"; return 1; }
  else
    expect "wireup: rank 1 -> rank 0: tcp [vm3 -> vm2: tcp," /tmp/nl.out || return 1
    ! grep -q "wireup: note:" /tmp/nl.out || { echo "a note from rank 1"; return 1; }
  fi
}

# Cases 7 and 7b: on node 3, RoCE (UDP 4791) arriving on the cable to node 2 (eth1) is dropped
# (on) or passed again (off); tcp still crosses. Dropped as it arrives, as a fabric that loses
# it would: dropped at egress, rxe's send fails locally and its requester retries at once, in
# the sending rank's own system call; under TCG that storm held vm3's CPU for 34 s (soft
# lockup) in a fresh-clone run, past the other ranks' probe deadline. Other nodes: nothing.
roce_lost_to_node2() {
  [ $node -eq 3 ] || return 0
  local tc=/usr/sbin/tc
  if [ "$1" = on ]; then
    $tc qdisc add dev eth1 clsact &&
      $tc filter add dev eth1 ingress protocol ip u32 match ip protocol 17 0xff \
        match ip dport 4791 0xffff action drop
  else
    $tc qdisc del dev eth1 clsact
  fi
}

# 7. The cable carries tcp but not RoCE: the probe fails at both ends, tcp takes over.
probe_fails() {
  [ $node -eq 1 ] && return 0  # not in this job
  roce_lost_to_node2 on || return 1
  env SPARK_LOG=info:wireup SPARK_RANK=$((node - 2)) SPARK_SIZE=2 SPARKNET_ROCE_TIMEOUT_MS=3000 \
    SPARK_RENDEZVOUS=10.60.2.2:29560 allreduce_perf -b 8 -e 256K -f 8 -n 2 -w 1 >/tmp/pf.out 2>&1
  rc=$?
  roce_lost_to_node2 off
  cat /tmp/pf.out
  [ $rc -eq 0 ] || return 1
  if [ $node -eq 2 ]; then
    expect "wireup: rank 0 -> rank 1: roce [vm2 -> vm3: roce rxe1(10.60.2.2)->rxe1(10.60.2.3)]" /tmp/pf.out &&
      grep -q "wireup: note: vm2 -> vm3: tcp, every RDMA WRITE probe failed (rxe1: .*)$" /tmp/pf.out &&
      expect "wireup: rank 0 -> rank 1: tcp [vm2 -> vm3: tcp, every RDMA WRITE probe failed" /tmp/pf.out || return 1
    [ "$(grep -c 'wireup: note:' /tmp/pf.out)" -eq 1 ] || { echo "not one note"; return 1; }
  else
    expect "wireup: rank 1 -> rank 0: tcp [vm3 -> vm2: tcp, every RDMA WRITE probe failed" /tmp/pf.out || return 1
  fi
}

# 7b. The same in a 3-rank job: ranks 1 and 2 have tcp for their pair and roce for rank 0,
#     rank 0 roce alone. Ranks on good links wait for the others' probe of the dead one (they
#     gave up on them just before: "did not answer on its liveness connection"), and every
#     rank cuts messages into the same pieces (tcp's slots are smaller than roce's, so rank 0's
#     own transports said 256 KiB, the others' 64 KiB: a mismatch at the first 1 MiB call).
probe_fails_three() {
  roce_lost_to_node2 on || return 1
  job3 29570 SPARKNET_ROCE_TIMEOUT_MS=3000 SPARK_LOG=info:wireup allreduce_perf -b 1M -e 4M \
    -f 4 -n 2 -w 1 >/tmp/p3.out 2>&1
  rc=$?
  roce_lost_to_node2 off
  cat /tmp/p3.out
  [ $rc -eq 0 ] || return 1
  case $node in
    1) awk '$1 == 4194304 && $9 == 0 { ok = 1 } END { exit !ok }' /tmp/p3.out ||
         { echo "no 4 MiB row without wrong elements (rank 0 prints the table)"; return 1; }
       ! grep -q "wireup: rank 0 -> rank .: tcp" /tmp/p3.out || { echo "rank 0 on tcp"; return 1; } ;;
    2) expect "wireup: rank 1 -> rank 2: tcp [vm2 -> vm3: tcp, every RDMA WRITE probe failed" /tmp/p3.out || return 1 ;;
    3) expect "wireup: rank 2 -> rank 1: tcp [vm3 -> vm2: tcp, every RDMA WRITE probe failed" /tmp/p3.out || return 1 ;;
  esac
}

# 8. Every cable qualified at speed, one direction shaped; then an MTU lowered on one end.
#    Under TCG absolute rates mean nothing: --relative judges against the run's fastest
#    direction, and 2 % thresholds keep the emulator's own jitter (clean directions spread
#    over 10x here) from failing a clean one; the shaped one moves nothing in its window.
doctor_bandwidth() {
  local tc=/usr/sbin/tc
  if [ $node -eq 1 ]; then
    $tc qdisc add dev eth0 root handle 1: prio &&
      $tc qdisc add dev eth0 parent 1:3 handle 30: tbf rate 4mbit burst 16kb latency 400ms &&
      $tc filter add dev eth0 parent 1: protocol ip u32 match ip protocol 17 0xff \
        match ip dport 4791 0xffff flowid 1:3 || return 1
  fi
  job3 29560 SPARK_LOG=info spark_doctor_probe --bandwidth --seconds 1 --relative \
    --warn-below 2 --fail-below 2 --iters 2 --probe-timeout-ms 10000 >/tmp/bw.out 2>&1
  [ $node -eq 1 ] && $tc qdisc del dev eth0 root
  [ $node -eq 1 ] || return 0
  cat /tmp/bw.out
  grep -Eq "^  FAIL +rank 0 \(vm1\) -> rank 1 \(vm2\) +rxe0->rxe0 " /tmp/bw.out ||
    { echo "no FAIL summary line for the shaped direction vm1 -> vm2"; return 1; }
  [ "$(grep -Ec '^  ok +rank' /tmp/bw.out)" -eq 5 ] || { echo "expected the 5 other directions ok"; return 1; }
  [ "$(grep -Ec ' bandwidth .* ok .*left eth[01] \+.*arrived on eth[01] \+' /tmp/bw.out)" -eq 5 ] ||
    { echo "expected 5 ok bandwidth rows with both interfaces' counters"; return 1; }
}
doctor_mtu() {
  # (the MTU change takes rxe1's port down for a moment: the job starts once it is back)
  if [ $node -eq 3 ]; then
    /usr/sbin/ip link set eth1 mtu 1200 || return 1
    i=0
    until grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state; do
      i=$((i + 1)); [ $i -le 100 ] || { echo "rxe1 not active again"; return 1; }; sleep 0.1
    done
  fi
  job3 29561 SPARK_LOG=error spark_doctor_probe --iters 2 --probe-timeout-ms 10000 >/tmp/mtu.out 2>&1
  if [ $node -eq 3 ]; then
    /usr/sbin/ip link set eth1 mtu 9000
    i=0
    until grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state || [ $i -ge 100 ]; do
      i=$((i + 1)); sleep 0.1
    done
  fi
  [ $node -eq 1 ] || return 0
  cat /tmp/mtu.out
  grep -Eq "path MTU .*FAIL .*MTU differs: vm2 eth1 9000, vm3 eth1 1200" /tmp/mtu.out ||
    { echo "no path MTU FAIL row naming vm2 eth1 9000 and vm3 eth1 1200"; return 1; }
  [ "$(grep -Ec 'path MTU .* ok ' /tmp/mtu.out)" -eq 2 ] || { echo "the two other cables must be ok"; return 1; }
}

run peer_up reachable $neighbours
[ $failed -eq 0 ] || exit 1
run triangle_default_roce default_roce
run triangle_split_direct split_direct
run triangle_map_wins_port1 map_wins
run triangle_stopped_rank stopped_rank
run triangle_cable_down cable_down
if [ -x /bin/spark_doctor_probe ]; then
  run triangle_doctor_roce_lanes doctor_roce_lanes
  run triangle_doctor_bandwidth doctor_bandwidth
  run triangle_doctor_mtu doctor_mtu
fi
run triangle_no_rdma_lane_tcp no_rdma_lane
run triangle_probe_fails_tcp probe_fails
run triangle_probe_fails_three_ranks probe_fails_three
exit $failed
