# Runs inside the VM (vm_run.sh --lanes 2 --bin sparkrun --bin spark_doctor_probe): `sparkrun
# doctor` across a job on Soft-RoCE (rxe0 on d0 10.50.0.1/24, rxe1 on d1 10.50.1.1/24, MTU
# 9000). Every pair of ranks must show an RDMA WRITE round trip on both lanes and the job
# must exit 0; a rank that never answers must turn into FAIL rows (and exit 2), not a hang;
# an interface at MTU 1500 is a warning (exit 1) while RDMA still passes.
set -u
. /vm_lib.sh
# doctor_all_well N: N ranks, N*(N-1)/2 pairs x 2 lanes of "rdma write ... ok", reach rows
# direct on both lanes, "all well", exit 0.
doctor_all_well() {
  n=$1
  out=$(sparkrun doctor -n "$n" --iters 8 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || { echo "doctor -n $n: exit $rc, expected 0"; return 1; }
  pairs=$(( n * (n - 1) / 2 ))
  for lane in rxe0 rxe1; do
    got=$(echo "$out" | grep -c "rdma write .*$lane->$lane .*rank .* ok ")
    [ "$got" -eq "$pairs" ] || { echo "doctor -n $n: $got ok rdma rows on $lane, expected $pairs"; return 1; }
  done
  got=$(echo "$out" | grep -c "reach .*rxe0,rxe1 .* ok .*direct on 2 lane")
  [ "$got" -eq "$pairs" ] || { echo "doctor -n $n: $got direct reach rows, expected $pairs"; return 1; }
  echo "$out" | grep -q "tcp round trip" && { echo "doctor -n $n: tcp rows although RDMA works"; return 1; }
  echo "$out" | grep -q "sparkrun doctor: all well" || { echo "doctor -n $n: no 'all well'"; return 1; }
}
# A rank that never answers: FAIL rows naming it on both lanes, exit 2, bounded time.
doctor_silent_peer() {
  t0=$(date +%s)
  out=$(sparkrun doctor -n 2 -x SPARK_DOCTOR_TEST_SILENT_RANK=1 --probe-timeout-ms 2000 --iters 4 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 2 ] || { echo "silent peer: exit $rc, expected 2"; return 1; }
  got=$(echo "$out" | grep -c "rdma write .*rank 1 .* FAIL .*no answer")
  [ "$got" -eq 2 ] || { echo "silent peer: $got FAIL rows, expected 2"; return 1; }
  echo "$out" | grep -q "reach .* FAIL .*UNREACHABLE" || { echo "silent peer: no UNREACHABLE row"; return 1; }
  [ $(( $(date +%s) - t0 )) -lt 60 ] || { echo "silent peer: took too long"; return 1; }
}
# d1 at MTU 1500 on this host: a WARN row with the fix, exit 1, RDMA still works on both lanes.
doctor_mtu_1500() {
  /usr/sbin/ip link set d1 mtu 1500
  out=$(sparkrun doctor -n 2 --iters 4 2>&1); rc=$?
  /usr/sbin/ip link set d1 mtu 9000
  echo "$out"
  [ $rc -eq 1 ] || { echo "mtu 1500: exit $rc, expected 1"; return 1; }
  echo "$out" | grep -q "MTU .*rxe1 .*WARN .*d1 MTU 1500.*ip link set d1 mtu 9000" || { echo "mtu 1500: no WARN row with the fix"; return 1; }
  [ "$(echo "$out" | grep -c "rdma write .* ok ")" -eq 2 ] || { echo "mtu 1500: RDMA rows not ok"; return 1; }
}
run doctor_job_2 doctor_all_well 2
run doctor_job_3 doctor_all_well 3
run doctor_silent_peer doctor_silent_peer
run doctor_mtu_1500 doctor_mtu_1500
exit $failed
