# Runs inside the VM (see vm_run.sh): rdma-core's own RC ping-pong on rxe0, as a check that
# the VM, the rxe driver and the verbs provider work before our own tests are judged.
set -u
[ -d /sys/class/infiniband/rxe0 ] || { echo "smoke: no rxe0"; exit 1; }
ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 50 >/tmp/srv.log 2>&1 &
srv=$!
sleep 1
ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 50 127.0.0.1 || { echo "smoke: client failed"; cat /tmp/srv.log; exit 1; }
wait $srv || { echo "smoke: server failed"; cat /tmp/srv.log; exit 1; }
echo "smoke: ok"
