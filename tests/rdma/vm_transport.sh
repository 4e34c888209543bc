# Runs inside the VM (vm_run.sh --lanes 2, MTU 9000): `sparkrun doctor` (when given) on this
# host and across a job (vm_doctor.sh, when given), the
# RoCE transport through the Transport interface (2 and 3 ranks on rxe0, striped over
# rxe0+rxe1, a SIGSTOPped rank), then an MTU mismatch between peers (d1 set to 1500), then
# RoCE lanes in the fabric map (spark_fabric_discover, when given) with two more rxe devices.
set -u
. /vm_lib.sh
doctor_ok() { sparkrun doctor; }
doctor_warns() {
  out=$(sparkrun doctor); rc=$?
  echo "$out"
  [ $rc -eq 1 ] && echo "$out" | grep -q 'MTU .*rxe1 .*WARN .*d1 MTU 1500'
}
if [ -x /bin/sparkrun ]; then run doctor_all_well doctor_ok; fi
# Doctor across a job (its own cases and verdict; leaves d1 at MTU 9000 and no extra devices).
if [ -x /bin/vm_doctor.sh ]; then run doctor_job vm_doctor.sh; fi
run transport_2 spark_verbs_transport_test --ranks 2 --devices rxe0 --msgs 400
run transport_3 spark_verbs_transport_test --ranks 3 --devices rxe0 --msgs 200
run transport_striped_3 spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 200
run transport_sigstop spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 100 --timeout-ms 2000 --stop-rank 1 --at-seq 12
/usr/sbin/ip link set d1 mtu 1500
if [ -x /bin/sparkrun ]; then run doctor_mtu_1500 doctor_warns; fi
run transport_mtu_mismatch spark_verbs_transport_test --ranks 2 --devices rxe0 --rank-devices 1=rxe1 --expect-connect-fail "path MTU mismatch"

# RoCE lanes in the fabric map (issue 11): node a owns rxe0 (d0, 10.50.0.1/24) and rxe1 (d1,
# 10.50.1.1/24); node b gets rxe2 on d2 (10.50.0.2/24) and rxe3 on d3 (10.50.1.2/24). Two
# spark_fabric_discover ranks (what `sparkrun fabric` runs; env rendezvous here) must find
# exactly the two same-subnet pairs, write a pin file, match it, and refuse a miscabled node.
discover2() {  # $1 = node b's devices, rest = options for both
  hb=$1; shift
  SPARK_TRANSPORT=roce SPARK_IB_HCA=rxe0,rxe1 SPARK_RANK=0 SPARK_SIZE=2 SPARK_HOST=a \
    SPARK_RENDEZVOUS=127.0.0.1:$port spark_fabric_discover "$@" >/tmp/fa.out 2>&1 &
  pa=$!
  SPARK_TRANSPORT=roce SPARK_IB_HCA=$hb SPARK_RANK=1 SPARK_SIZE=2 SPARK_HOST=b \
    SPARK_RENDEZVOUS=127.0.0.1:$port spark_fabric_discover "$@" >/tmp/fb.out 2>&1
  rb=$?
  wait $pa
  ra=$?
  port=$((port + 1))
  echo "node a rc $ra, node b rc $rb"
  cat /tmp/fa.out /tmp/fb.out
  [ $ra -eq 0 ] && [ $rb -eq 0 ]
}
fabric_lanes() {
  discover2 rxe2,rxe3 --write /tmp/pin.json || return 1
  expect "a -> b: direct rxe0(10.50.0.1)->rxe2(10.50.0.2) rxe1(10.50.1.1)->rxe3(10.50.1.2)" /tmp/fa.out &&
    expect "b -> a: direct rxe2(10.50.0.2)->rxe0(10.50.0.1) rxe3(10.50.1.2)->rxe1(10.50.1.1)" /tmp/fa.out &&
    expect '"a:rxe1"' /tmp/pin.json && expect '"b:rxe3"' /tmp/pin.json &&
    expect '"ipv4": "10.50.1.2/24"' /tmp/pin.json &&
    ! grep -q 'rxe0(10.50.0.1)->rxe3' /tmp/fa.out
}
fabric_pinned() {
  discover2 rxe2,rxe3 --fabric /tmp/pin.json && expect "fabric map matches /tmp/pin.json" /tmp/fa.out
}
fabric_miscabled() {  # node b without rxe3: the pinned a:rxe1 <-> b:rxe3 cable is missing
  discover2 rxe2 --fabric /tmp/pin.json && return 1
  expect "missing cable a:rxe1 <-> b:rxe3" /tmp/fa.out
}
if [ -x /bin/spark_fabric_discover ]; then
  port=29600
  for k in 0 1; do
    d=d$((k + 2))
    /usr/sbin/ip link add $d type dummy
    /usr/sbin/ip addr add 10.50.$k.2/24 dev $d
    /usr/sbin/ip link set $d up
    /usr/sbin/rdma link add rxe$((k + 2)) type rxe netdev $d
  done
  run fabric_two_rxe_lanes fabric_lanes
  run fabric_pinned_match fabric_pinned
  run fabric_miscabled_refused fabric_miscabled
fi
exit $failed
