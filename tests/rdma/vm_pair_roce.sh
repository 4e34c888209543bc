# Runs inside each VM of vm_mesh.sh --links 1-2,1-2 (two links: ethK = 10.60.K.NODE/24 with rxeK): RoCE v2
# across a real wire. Node 1 is rank 0 (rendezvous on 10.60.0.1), node 2 is rank 1; each VM
# checks its own results, so both consoles carry a verdict.
#   1. the fabric map with RDMA lanes: two direct lane pairs, rxe0<->rxe0 and rxe1<->rxe1;
#   2. libspark collectives on SPARK_TRANSPORT=roce striped over rxe0+rxe1 (allreduce_perf
#      checks every element on every rank), and both e1000 links carried the traffic;
#   3. a SIGSTOPped rank on node 2: node 1's failure record names it, its rxe lane and seq;
#   4. wire faults from netem (vm_netem.sh, when fault_stream is built): mixed collectives over
#      tcp on eth0 under delay, reorder, duplicates, corruption and loss at once; over roce on
#      rxe1 under 1 % loss + 5 ms delay; the rxe1 cable cut mid-stream, fail-stop in bound;
#   5. `sparkrun doctor --bandwidth`'s program (when built): both cables qualified both ways by
#      RDMA WRITE streams, each direction ok with both interfaces' byte counters; then both
#      cables at once each way (a job's striping), judged against the sum of the two.
set -u
node=$(cat /etc/spark_node)
peer=$((3 - node))
rank=$((node - 1))
. /vm_lib.sh
export SPARK_RANK=$rank SPARK_SIZE=2 SPARK_HOST=vm$node SPARK_TRANSPORT=roce
export SPARKNET_ROCE_TIMEOUT_MS=30000 SPARK_JOIN_TIMEOUT_MS=120000

fabric() {
  SPARK_RENDEZVOUS=10.60.0.1:29500 spark_fabric_discover --write /tmp/map.json >/tmp/fab.out 2>&1
  rc=$?
  cat /tmp/fab.out
  [ $rc -eq 0 ] || return 1
  [ $node -eq 2 ] && return 0  # rank 0 prints the map
  expect "vm1 -> vm2: direct rxe0(10.60.0.1)->rxe0(10.60.0.2) rxe1(10.60.1.1)->rxe1(10.60.1.2)" /tmp/fab.out &&
    expect "vm2 -> vm1: direct rxe0(10.60.0.2)->rxe0(10.60.0.1) rxe1(10.60.1.2)->rxe1(10.60.1.1)" /tmp/fab.out
}
tx() { cat /sys/class/net/eth$1/statistics/tx_bytes; }
collectives() {
  a0=$(tx 0) a1=$(tx 1)
  SPARK_LANES=rxe0,rxe1 SPARK_RENDEZVOUS=10.60.0.1:29501 allreduce_perf -b 8 -e 4M -f 8 -n 2 -w 1 || return 1
  SPARK_LANES=rxe0,rxe1 SPARK_RENDEZVOUS=10.60.0.1:29502 allreduce_perf -t allgather -b 8 -e 1M -f 64 -n 2 -w 1 || return 1
  d0=$(( $(tx 0) - a0 )) d1=$(( $(tx 1) - a1 ))
  echo "sent over eth0: $d0 bytes, eth1: $d1 bytes"
  [ $d0 -gt 1000000 ] && [ $d1 -gt 1000000 ]
}
# Node 2 SIGSTOPs its rank once RDMA traffic flows; node 1's record must name rank 1, an rxe
# lane and the sequence number, within the 3 s deadline (the peer's kernel still ACKs).
# 4. Both cables at speed: 4 RDMA WRITE streams and 2 striped ones, all ok (relative to the
#    run's fastest and to the lanes' sum, with 2 % thresholds: TCG's rates spread widely).
doctor_bandwidth() {
  env -u SPARK_TRANSPORT SPARK_RENDEZVOUS=10.60.0.1:29504 SPARK_LOG=error spark_doctor_probe \
    --bandwidth --seconds 1 --relative --warn-below 2 --fail-below 2 --iters 2 \
    --probe-timeout-ms 10000 >/tmp/bw.out 2>&1
  [ $node -eq 1 ] || return 0
  cat /tmp/bw.out
  [ "$(grep -Ec '^  ok +rank [01] \(vm[12]\) -> rank [01] \(vm[12]\) +rxe([01])->rxe\1 ' /tmp/bw.out)" -eq 4 ] ||
    { echo "expected 4 ok directions (two cables, both ways)"; return 1; }
  for e in eth0 eth1; do
    [ "$(grep -Ec " bandwidth .* ok .*left $e \+.*arrived on $e \+" /tmp/bw.out)" -eq 2 ] ||
      { echo "expected both directions of the $e cable with their counters"; return 1; }
  done
  [ "$(grep -Ec '^  ok +rank [01] \(vm[12]\) -> rank [01] \(vm[12]\) +rxe0->rxe0\+rxe1->rxe1 ' /tmp/bw.out)" -eq 2 ] ||
    { echo "expected both cables at once, each way, ok"; return 1; }
  [ "$(grep -Ec " striped .* ok .*of its lanes' own streams.*left eth0\+eth1 \+" /tmp/bw.out)" -eq 2 ] ||
    { echo "expected 2 striped rows judged against the lanes' sum, with both interfaces"; return 1; }
}
stopped_peer() {
  args="-b 8 -e 8 -n 1000000 -w 0"
  export SPARKNET_ROCE_TIMEOUT_MS=3000 SPARK_LANES=rxe0,rxe1 SPARK_RENDEZVOUS=10.60.0.1:29503
  if [ $node -eq 1 ]; then
    allreduce_perf $args >/tmp/stop.out 2>&1
    rc=$?
    grep -a 'rank 1' /tmp/stop.out | head -3
    [ $rc -ne 0 ] && grep -q 'seq [0-9]* step [0-9]*: no data from rank 1 on lane rxe[01] after' /tmp/stop.out
    return
  fi
  p0=$(pkts 0)
  allreduce_perf $args >/tmp/stop.out 2>&1 &
  pid=$!
  i=0
  while [ $(( $(pkts 0) - p0 )) -lt 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  kill -STOP $pid || return 1
  echo "stopped rank 1 after $(( $(pkts 0) - p0 )) packets on rxe0"
  grep -q '^State:.*T' /proc/$pid/status || return 1
  sleep 12  # node 1 gives up after 3 s
  kill -KILL $pid
  wait $pid
  return 0
}
run peer_up reachable 10.60.0.$peer 10.60.1.$peer
[ $failed -eq 0 ] || exit 1
run fabric_rdma_lanes fabric
run roce_collectives_2_links collectives
run roce_stopped_peer stopped_peer
if [ -x /bin/fault_stream ]; then
  run netem_wire_faults env NETEM_CASES="tcp_all roce_loss_delay roce_cut" sh /bin/vm_netem.sh
fi
if [ -x /bin/spark_doctor_probe ]; then run doctor_bandwidth_pair doctor_bandwidth; fi
exit $failed
