# Runs inside both VMs of bench/roce_vs_ucx.sh (vm_mesh.sh --links 1-2,1-2): libspark's
# allreduce (allreduce_perf, SPARK_TRANSPORT=roce on rxe0) against Open MPI 4.1 over UCX
# (mpi_allreduce, --mca pml ucx, UCX_NET_DEVICES=rxe0:1) on the same rxe devices, float sum,
# the same sizes and iterations, runs alternating. The control traffic of both (libspark's
# rendezvous, mpirun's out-of-band channel) crosses the other cable, eth1.
# Node 2 only serves a remote shell (busybox nc on port 2222) through which node 1 starts
# node 2's libspark rank and mpirun its orted (plm_rsh_agent /bin/vm_rsh, as ssh would).
# Node 1 prints rows:
#   UCXBENCH,<spark|ucx>,<repeat>,<bytes>,<us>     one per size per run
#   UCXCOUNT,<spark|ucx>,<bytes>,<counter>,<per allreduce>   node 1's rxe0 counters
# The settings come from the wrapper: reps, sizes (-b/-e/-f), iters, warmup.
set -u
node=$(cat /etc/spark_node)
. /vm_lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 SHELL=/bin/sh HOME=/tmp
reps=${reps:-3} iters=${iters:-20} warmup=${warmup:-5} lo=${lo:-1024} hi=${hi:-16777216} factor=${factor:-4}
peer=10.60.1.2
# UCX's shared-memory transports stat /dev/shm (the initramfs has none).
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
# Open MPI tells nodes apart by host name: each VM gets its own (the initramfs has none).
hostname vm$node
printf '127.0.0.1 localhost\n10.60.1.1 vm1\n10.60.1.2 vm2\n' >/etc/hosts
# Where the host has them (mpirun may start /usr/bin/orted by its install prefix).
mkdir -p /usr/bin
for b in mpirun orted mpi_allreduce; do ln -sf /bin/$b /usr/bin/$b; done
# mpirun's remote shell: "vm_rsh HOST COMMAND..." as it would call ssh. The command goes into
# a file on HOST (a quoted here-document keeps it verbatim) and runs there detached, its output
# in /tmp/orted.log: busybox nc ends the connection when its input ends, which would take an
# attached orted's output with it. Both VMs have it: orted checks the agent mpirun names.
cat >/bin/vm_rsh <<'RSH'
#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
h=$(awk -v h="$1" '$2 == h {print $1}' /etc/hosts)
shift
{
  printf 'cat >/tmp/rsh.%s <<"RSH_EOF"\n%s\nRSH_EOF\n' $$ "$*"
  printf 'setsid sh /tmp/rsh.%s </dev/null >>/tmp/orted.log 2>&1 &\nexit\n' $$
} | nc "$h" 2222
RSH
chmod +x /bin/vm_rsh
if [ "$node" -eq 2 ]; then
  nc -ll -p 2222 -e /bin/sh &
  # Until node 1 says it is done, or its VM is gone (powered off after a failure).
  i=0 gone=0
  while [ ! -e /tmp/bench_done ] && [ $i -lt 1800 ] && [ $gone -lt 5 ]; do
    sleep 5; i=$((i + 5))
    if ping -c 1 -W 2 10.60.1.1 >/dev/null 2>&1; then gone=0; else gone=$((gone + 1)); fi
  done
  exit 0
fi
remote() { printf '%s\nexit\n' "$*" | nc $peer 2222; }
run reachable reachable 10.60.0.2 $peer
i=0
until remote true; do
  i=$((i + 1)); [ $i -lt 60 ] || { echo "no remote shell on $peer"; exit 1; }; sleep 1
done
spark_env="SPARK_TRANSPORT=roce SPARK_LANES=rxe0 SPARK_SIZE=2 SPARKNET_ROCE_TIMEOUT_MS=60000 SPARK_JOIN_TIMEOUT_MS=120000"
port=29800
spark_run() {  # spark_run ARGS...: rank 0 here, rank 1 on node 2; CSV of rank 0 on stdout
  port=$((port + 1))
  if [ $where = pair ]; then
    remote "env $spark_env SPARK_RANK=1 SPARK_HOST=vm2 SPARK_RENDEZVOUS=10.60.1.1:$port allreduce_perf $* >/tmp/r1.out 2>&1" &
  else  # both ranks here, named as two hosts so that they talk RoCE (rxe0 to itself), not shm
    env $spark_env SPARK_RANK=1 SPARK_HOST=vm1b SPARK_RENDEZVOUS=10.60.1.1:$port allreduce_perf "$@" >/tmp/r1.out 2>&1 &
  fi
  rpid=$!
  env $spark_env SPARK_RANK=0 SPARK_HOST=vm1 SPARK_RENDEZVOUS=10.60.1.1:$port allreduce_perf --csv "$@" >/tmp/r0.out 2>&1
  rc=$?
  wait $rpid
  [ $rc -eq 0 ] || { echo "BENCH_FAIL spark $*"; cat /tmp/r0.out; return 1; }
  awk -F, '$1 == "allreduce" {print $4 "," $9; if ($12 != 0) exit 1}' /tmp/r0.out ||
    { echo "BENCH_FAIL spark: wrong elements"; return 1; }
}
mpi_common="--host vm1,vm2 --mca plm_rsh_agent /bin/vm_rsh --mca plm_rsh_no_tree_spawn 1 --mca oob_tcp_if_include 10.60.1.0/24"
ucx_run() {  # ucx_run ARGS...: mpirun over both VMs ($mpi_extra: more mpirun options); CSV "bytes,us"
  timeout -s KILL ${mpi_timeout:-400} mpirun -n 2 $mpi_common --mca pml ucx --mca btl self --mca osc ^ucx \
    --mca mca_base_component_show_load_errors 0 ${mpi_extra:-} $ucx_env \
    mpi_allreduce "$@" >/tmp/m.out 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "BENCH_FAIL ucx $*"; tail -30 /tmp/m.out; return 1; }
  awk -F, '$1 ~ /^[0-9]+$/ {print $1 "," $2}' /tmp/m.out
}
# A first small run with a short bound, its output's UCX lines shown when it fails: a launch
# that never comes up (remote shell, orted, UCX on rxe) must not hold the whole boot. UCX's
# RC endpoints are wired up through UD, and UD on rxe with the GID UCX picks by itself (the
# RoCE v2 ::ffff:a.b.c.d one, index 1) timed out ("UD endpoint ... unhandled timeout error"),
# with the link-local one (index 0) it works: that first, then UCX's defaults (the UCXLANES
# row shows UCX's lanes; node 1's rxe0 counters show what crossed RoCE).
ucx_probe() {
  for ucx_env in "-x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX=0" "-x UCX_NET_DEVICES=rxe0:1"; do
    echo "UCX probe with '$ucx_env'"
    mpi_timeout=120 mpi_extra="-x UCX_LOG_LEVEL=info" ucx_run -b 1024 -e 1024 -n 2 -w 1 && {
      echo "UCXENV,$ucx_env"
      grep -a 'ep_cfg' /tmp/m.out | sed 's/.*ep_cfg/UCXLANES,ep_cfg/' | sort -u | head -4
      return 0
    }
    grep -a 'UCX  \|Fatal' /tmp/m.out | grep -v 'readlink\|match' | head -12
  done
  return 1
}
ucx_probe_local() {
  mpi_timeout=120 mpi_extra="-x UCX_LOG_LEVEL=info" ucx_run -b 1024 -e 1024 -n 2 -w 1 || {
    grep -a 'UCX  \|Fatal' /tmp/m.out | grep -v 'readlink\|match' | head -12; return 1; }
  echo "UCXENV,$ucx_env"
  grep -a 'ep_cfg' /tmp/m.out | sed 's/.*ep_cfg/UCXLANES,ep_cfg/' | sort -u | head -4
}
where=pair
f0=$failed
run ucx_probe ucx_probe
if [ $failed -ne $f0 ]; then
  # Both ranks of both libraries in this VM on rxe0 (rxe loops the packets back inside the
  # driver: every packet built and checked, none crosses the cable), UCX without its
  # shared-memory transports, RC wired up through UD on the same device.
  where=local
  mpi_common="--host vm1:2 --mca plm_rsh_agent /bin/vm_rsh"
  ucx_env="-x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX=0 -x UCX_TLS=rc_verbs,ud_verbs,self"
  echo "UCXWHERE,local"
  run ucx_probe_local ucx_probe_local
fi
if [ $failed -ne $f0 ] && [ $where = local ] && [ $failed -gt $((f0 + 1)) ]; then
  echo "orted's log on vm2:"; remote "cat /tmp/orted.log" | tail -40
  remote "touch /tmp/bench_done"
  exit 1
fi
ucx_ok=1
counters() { grep -H . /sys/class/infiniband/rxe0/ports/1/hw_counters/* | sed 's|.*/||'; }
r=1
while [ $r -le $reps ]; do
  # Alternating: even repeats start with UCX.
  order="spark ucx"
  [ $((r % 2)) -eq 0 ] && order="ucx spark"
  for lib in $order; do
    [ $lib = ucx ] && [ $ucx_ok -eq 0 ] && continue
    t0=$(date +%s)
    ${lib}_run -b $lo -e $hi -f $factor -n $iters -w $warmup >/tmp/rows || continue
    sed "s/^/UCXBENCH,$lib,$r,/" /tmp/rows
    echo "=== $lib repeat $r: $(($(date +%s) - t0)) s"
  done
  r=$((r + 1))
done
# RDMA operations per allreduce: node 1's rxe0 counters over N+1 calls minus over 1 call
# (the difference leaves out the wire-up / MPI_Init and the final reports), divided by N.
for s in ${count_sizes-1024 65536}; do
  n=40
  [ $s -gt 65536 ] && n=10
  for lib in spark ucx; do
    [ $lib = ucx ] && [ $ucx_ok -eq 0 ] && continue
    counters >/tmp/k0; ${lib}_run -b $s -e $s -n 1 -w 0 >/dev/null; counters >/tmp/k1
    ${lib}_run -b $s -e $s -n $((n + 1)) -w 0 >/dev/null; counters >/tmp/k2
    awk -F: -v lib=$lib -v s=$s -v n=$n 'FILENAME == ARGV[1] {a[$1] = $2; next}
      FILENAME == ARGV[2] {b[$1] = $2; next}
      {d = ($2 - b[$1]) - (b[$1] - a[$1]); if (d != 0) printf "UCXCOUNT,%s,%s,%s,%.1f\n", lib, s, $1, d / n}' \
      /tmp/k0 /tmp/k1 /tmp/k2
  done
done
remote "touch /tmp/bench_done"
exit 0
