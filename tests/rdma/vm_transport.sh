# Runs inside the VM (vm_run.sh --lanes 2): the RoCE transport through the Transport
# interface, 2 and 3 ranks on rxe0, striped over rxe0+rxe1, and a SIGSTOPped rank.
set -u
failed=0
run() {
  name=$1; shift
  echo "=== $name: $*"
  t0=$(date +%s)
  if "$@"; then echo "=== $name: PASS ($(( $(date +%s) - t0 )) s)"; else echo "=== $name: FAIL"; failed=$((failed+1)); fi
}
run transport_2 spark_verbs_transport_test --ranks 2 --devices rxe0 --msgs 400
run transport_3 spark_verbs_transport_test --ranks 3 --devices rxe0 --msgs 200
run transport_striped_3 spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 200
run transport_sigstop spark_verbs_transport_test --ranks 3 --devices rxe0,rxe1 --msgs 100 --timeout-ms 2000 --stop-rank 1 --at-seq 12
exit $failed
