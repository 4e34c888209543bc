# Runs inside both VMs of a pair (vm_mesh.sh --links 1-2,1-2: eth0 and eth1, rxe0 and rxe1 on
# them): wire faults from netem, which Debian's kernel has and the build host's does not.
# Each case is one 2-rank job of `fault_stream mixed` (allreduce, reduce_scatter, allgather,
# broadcast and alltoall of i32, every element checked on every rank) while both VMs' netem
# impairs the data cable's egress. A case passes when the job completes with every result
# correct, or ends by fail-stop with a record naming the lane; a wrong element or a job still
# running after its bound fails it.
#   tcp over eth0 (rendezvous on eth1): clean, delay 5 ms +- 2 ms, reorder 25 %, duplicate 5 %,
#     corrupt 0.1 %, loss 1 %, all of them at once (tcp_all), corrupt 1 % (tcp_corrupt_1, a
#     heavier check that no corrupted byte gets through);
#   roce on rxe1/eth1 (rendezvous on eth0): clean, loss 1 % + delay 5 ms, corrupt 0.1 % and 1 %,
#     and
#     the cable cut (netem loss 100 %) mid-stream: the fail-stop must come within
#     SPARKNET_ROCE_TIMEOUT_MS + a bound although the QP retransmits (docs/reliability.md).
# Node 1 (rank 0) prints a row per case: "NETEM,<case>,<transport>,<outcome>,<ms>,<notes>"
# (ms: the stream's time, or for the cut the time from the cut to the exit).
# NETEM_CASES (space-separated case names, default all) selects a subset: the suite runs a
# lean one inside rdma.vm_pair (vm_pair_roce.sh), bench/netem_vm.sh all of them.
set -u
node=$(cat /etc/spark_node)
rank=$((node - 1))
. /vm_lib.sh
tc=/usr/sbin/tc
rounds=${NETEM_ROUNDS:-10}
count=${NETEM_COUNT:-65536}
cases=${NETEM_CASES:-tcp_clean tcp_delay tcp_reorder tcp_duplicate tcp_corrupt tcp_loss tcp_all tcp_corrupt_1 roce_clean roce_loss_delay roce_corrupt roce_corrupt_1 roce_cut}
# The cut's bound beyond the timeout: the wait point checks its deadline between polls; TCG on
# a loaded 2-core host delays a guest by up to a second or two.
cut_bound_ms=${NETEM_CUT_BOUND_MS:-3000}
export SPARK_RANK=$rank SPARK_SIZE=2 SPARK_HOST=vm$node SPARK_JOIN_TIMEOUT_MS=120000
now_ms() { awk '{printf "%d\n", $1 * 1000}' /proc/uptime; }
snmp() {  # snmp PROTO FIELD: a counter of /proc/net/snmp
  awk -v p="$1:" -v f="$2" '$1 == p && !h {for (i = 2; i <= NF; i++) c[i] = $i; h = 1; next}
    $1 == p && h {for (i = 2; i <= NF; i++) if (c[i] == f) print $i}' /proc/net/snmp
}
# Packets the guest's stack dropped for a bad checksum: IP headers (IpExt) plus PROTO's.
csum_drops() { echo $(( $(snmp "$1" InCsumErrors) + $(awk '$1 == "IpExt:" && !h {for (i = 2; i <= NF; i++) if ($i == "InCsumErrors") c = i; h = 1; next} $1 == "IpExt:" {print $c}' /proc/net/netstat) )); }
rxe_counters() { grep -H . /sys/class/infiniband/rxe1/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||'; }
# counter_deltas BEFORE AFTER: "name +delta" for every rxe counter that moved.
counter_deltas() {
  awk -F: 'NR == FNR {b[$1] = $2; next} $2 != b[$1] {printf "%s%s +%d", s, $1, $2 - b[$1]; s = " "}' "$1" "$2"
}
netem() {  # netem DEV ARGS...: replaces DEV's root qdisc (none: removes it)
  dev=$1; shift
  $tc qdisc del dev "$dev" root 2>/dev/null
  [ "$1" = none ] || $tc qdisc add dev "$dev" root netem "$@"
}
# verdict NAME RC OUT LANE: prints the outcome; returns 1 on a wrong element, a hang or a
# failure without a record naming LANE.
verdict() {
  if grep -q 'WRONG DATA' "$3"; then
    echo "$1: a wrong result: $(grep -m1 'WRONG DATA' "$3")"; return 1
  fi
  if [ "$2" = 0 ]; then
    grep -q "^COMPLETED rank $rank mixed" "$3" || { echo "$1: exit 0 without COMPLETED"; cat "$3"; return 1; }
    outcome=completed
    stream_ms=$(sed -n "s/^COMPLETED rank $rank mixed [0-9]* in \([0-9]*\) ms$/\1/p" "$3")
    return 0
  fi
  [ "$2" = 124 ] && { echo "$1: still running at its bound (a hang)"; tail -5 "$3"; return 1; }
  grep -Eq "on lane $4|lane $4" "$3" || { echo "$1: exit $2 without a record naming lane $4"; cat "$3"; return 1; }
  outcome=fail-stop
  grep -Em1 "lane $4" "$3"
  return 0
}
row() { [ $node -eq 1 ] && echo "NETEM,$1,$2,$3,$4,$5"; return 0; }
port=29600
# tcp_case NAME NETEM_ARGS...: the stream over eth0's tcp under that netem on both VMs.
tcp_case() {
  name=$1; shift
  port=$((port + 1))
  netem eth0 "$@" || return 1
  r0=$(snmp Tcp RetransSegs) c0=$(csum_drops Tcp)
  timeout -s KILL 240 env SPARK_TRANSPORT=tcp SPARK_DATA_NET=10.60.0.0/24 SPARKNET_ROCE_TIMEOUT_MS=10000 \
    SPARK_RENDEZVOUS=10.60.1.1:$port fault_stream mixed "$rounds" "$count" >/tmp/$name.out 2>&1
  rc=$?
  [ $rc = 137 ] && rc=124
  netem eth0 none
  verdict "$name" $rc /tmp/$name.out 'tcp:[0-9]+' || return 1
  notes="netem $*; tcp segments retransmitted $(( $(snmp Tcp RetransSegs) - r0 )), bad checksums caught $(( $(csum_drops Tcp) - c0 ))"
  row "$name" tcp $outcome "${stream_ms:--}" "$notes"
}
# roce_case NAME TIMEOUT_MS NETEM_ARGS...: the stream over rxe1 under that netem on eth1.
roce_case() {
  name=$1 tmo=$2; shift 2
  port=$((port + 1))
  netem eth1 "$@" || return 1
  rxe_counters >/tmp/c0
  u0=$(csum_drops Udp)
  timeout -s KILL 240 env SPARK_TRANSPORT=roce SPARK_LANES=rxe1 SPARKNET_ROCE_TIMEOUT_MS=$tmo \
    SPARK_RENDEZVOUS=10.60.0.1:$port fault_stream mixed "$rounds" "$count" >/tmp/$name.out 2>&1
  rc=$?
  [ $rc = 137 ] && rc=124
  netem eth1 none
  rxe_counters >/tmp/c1
  verdict "$name" $rc /tmp/$name.out rxe1 || return 1
  notes="netem $*; bad checksums caught $(( $(csum_drops Udp) - u0 )); rxe1 $(counter_deltas /tmp/c0 /tmp/c1)"
  row "$name" roce $outcome "${stream_ms:--}" "$notes"
}
# The cable cut mid-stream (netem loss 100 % on both VMs' eth1 once RDMA traffic flows): both
# ranks must end by fail-stop naming rxe1 within TIMEOUT + cut_bound_ms of their own cut.
roce_cut() {
  tmo=3000
  port=$((port + 1))
  rxe_counters >/tmp/c0
  p0=$(pkts 1)
  env SPARK_TRANSPORT=roce SPARK_LANES=rxe1 SPARKNET_ROCE_TIMEOUT_MS=$tmo \
    SPARK_RENDEZVOUS=10.60.0.1:$port fault_stream mixed 1000000 4096 >/tmp/cut.out 2>&1 &
  pid=$!
  i=0
  while [ $(( $(pkts 1) - p0 )) -lt 2000 ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
  kill -0 $pid 2>/dev/null || { echo "the stream ended before the cut"; cat /tmp/cut.out; return 1; }
  netem eth1 loss 100% || { kill -9 $pid; return 1; }
  t_cut=$(now_ms)
  limit=$(( (tmo + cut_bound_ms + 5000) / 100 ))  # give up waiting well past the bound
  i=0
  while kill -0 $pid 2>/dev/null && [ $i -lt $limit ]; do sleep 0.1; i=$((i + 1)); done
  took=$(( $(now_ms) - t_cut ))
  if kill -0 $pid 2>/dev/null; then
    kill -9 $pid; wait $pid; netem eth1 none
    echo "roce_cut: still running $took ms after the cut (a hang)"; tail -5 /tmp/cut.out; return 1
  fi
  wait $pid
  rc=$?
  netem eth1 none
  rxe_counters >/tmp/c1
  [ $rc -ne 0 ] || { echo "roce_cut: completed across a cut cable"; return 1; }
  verdict roce_cut $rc /tmp/cut.out rxe1 || return 1
  how=deadline
  grep -q 'RDMA write to rank [0-9] on lane rxe1 failed' /tmp/cut.out && how="error completion"
  row roce_cut roce "fail-stop ($how)" $took "timeout $tmo ms; rxe1 $(counter_deltas /tmp/c0 /tmp/c1)"
  echo "roce_cut: fail-stop by $how $took ms after the cut (timeout $tmo ms, bound +$cut_bound_ms ms)"
  [ $took -le $((tmo + cut_bound_ms)) ] || { echo "roce_cut: later than timeout + bound"; return 1; }
}
run netem_peer_up reachable 10.60.0.$((3 - node)) 10.60.1.$((3 - node))
[ $failed -eq 0 ] || exit 1
for c in $cases; do
  case $c in
    tcp_clean) run $c tcp_case $c none ;;
    tcp_delay) run $c tcp_case $c delay 5ms 2ms ;;
    tcp_reorder) run $c tcp_case $c delay 5ms reorder 25% 50% ;;
    tcp_duplicate) run $c tcp_case $c duplicate 5% ;;
    tcp_corrupt) run $c tcp_case $c corrupt 0.1% ;;
    tcp_loss) run $c tcp_case $c loss 1% ;;
    tcp_all) run $c tcp_case $c delay 5ms 2ms reorder 25% 50% duplicate 5% corrupt 0.1% loss 1% ;;
    tcp_corrupt_1) run $c tcp_case $c corrupt 1% ;;
    roce_clean) run $c roce_case $c 10000 none ;;
    roce_loss_delay) run $c roce_case $c 4000 loss 1% delay 5ms ;;
    roce_corrupt) run $c roce_case $c 4000 corrupt 0.1% ;;
    roce_corrupt_1) run $c roce_case $c 4000 corrupt 1% ;;
    roce_cut) run $c roce_cut ;;
    *) echo "vm_netem: unknown case $c"; failed=$((failed + 1)) ;;
  esac
done
exit $failed
