# Runs inside the VM (vm_run.sh --lanes 2, MTU 9000): `sparkrun doctor` (when given), the
# RoCE transport through the Transport interface (2 and 3 ranks on rxe0, striped over
# rxe0+rxe1, a SIGSTOPped rank), then an MTU mismatch between peers (d1 set to 1500).
set -u
failed=0
run() {
  name=$1; shift
  echo "=== $name: $*"
  t0=$(date +%s)
  if "$@"; then echo "=== $name: PASS ($(( $(date +%s) - t0 )) s)"; else echo "=== $name: FAIL"; failed=$((failed+1)); fi
}
doctor_ok() { sparkrun doctor; }
doctor_warns() {
  out=$(sparkrun doctor); rc=$?
  echo "$out"
  [ $rc -eq 1 ] && echo "$out" | grep -q 'MTU .*rxe1 .*WARN .*d1 MTU 1500'
}
if [ -x /bin/sparkrun ]; then run doctor_all_well doctor_ok; fi
run transport_2 spark_verbs_transport_test --ranks 2 --devices rxe0 --msgs 400
run transport_3 spark_verbs_transport_test --ranks 3 --devices rxe0 --msgs 200
run transport_striped_3 spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 200
run transport_sigstop spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 100 --timeout-ms 2000 --stop-rank 1 --at-seq 12
/usr/sbin/ip link set d1 mtu 1500
if [ -x /bin/sparkrun ]; then run doctor_mtu_1500 doctor_warns; fi
run transport_mtu_mismatch spark_verbs_transport_test --ranks 2 --devices rxe0 --rank-devices 1=rxe1 --expect-connect-fail "path MTU mismatch"
exit $failed
