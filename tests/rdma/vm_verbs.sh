# Runs inside the VM (see vm_run.sh): the standalone verbs tests on rxe0. Every case prints
# its own PASS/FAIL line; the script's exit code is the number of failed cases.
set -u
. /vm_lib.sh
# rdma-core's own ping-pong first: tells "the VM / rxe is broken" from "our code is broken".
# One more try after a failure: under TCG its own tcp exchange of QP addresses was once reset
# (a fresh clone, 6 Dec 04:15 UTC; every spark case after it passed), and one reset must not
# hide whether rxe works. Two failures in a row fail the case.
pingpong_once() {
  ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 20 >/tmp/pp_srv.log 2>&1 &
  srv=$!
  sleep 1
  if ! ibv_rc_pingpong -d rxe0 -g 1 -s 4096 -n 20 127.0.0.1 >/tmp/pp_cli.log 2>&1; then
    kill $srv 2>/dev/null
    wait $srv 2>/dev/null
    return 1
  fi
  wait $srv
}
pingpong() {
  pingpong_once && return 0
  echo "ibv_rc_pingpong failed once:"
  cat /tmp/pp_cli.log /tmp/pp_srv.log
  pingpong_once || { cat /tmp/pp_cli.log /tmp/pp_srv.log; return 1; }
}
run ibv_rc_pingpong pingpong
run roundtrip_2 spark_verbs_roundtrip --ranks 2 --iters 200 --bytes 65536
run roundtrip_3 spark_verbs_roundtrip --ranks 3 --iters 100 --bytes 65536
run roundtrip_sigstop spark_verbs_roundtrip --ranks 3 --iters 50 --bytes 4096 --timeout-ms 2000 --stop-rank 1 --at-seq 7 --expect "no data from rank 1"
run roundtrip_killed spark_verbs_roundtrip --ranks 2 --iters 50 --bytes 4096 --timeout-ms 4000 --kill-rank 1 --at-seq 7 --delay-ms 300 --expect "no data from rank 1"
run roundtrip_bad_rkey spark_verbs_roundtrip --ranks 3 --iters 20 --bytes 4096 --timeout-ms 3000 --bad-rkey-rank 2 --at-seq 5 --expect "remote access error"
exit $failed
