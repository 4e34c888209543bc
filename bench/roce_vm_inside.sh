# Runs inside each VM of bench/roce_vm.sh (vm_mesh.sh): allreduce 1 KiB..16 MiB on the same
# virtual cables with roce (the default) and with tcp (SPARK_DATA_NET: tcp follows the same
# map and relays the same way), then (ring only) 3 ranks in a line, one pair through the relay. Rank 0 prints rows "BENCH,<case>,<transport>,<bytes>,<us>".
# Sourced by bench/roce_vm.sh's wrapper, which sets shape=triangle|ring.
set -u
node=$(cat /etc/spark_node)
rank=$((node - 1))
shape=${shape:?set by the wrapper: triangle or ring}
ip=/usr/sbin/ip
if [ $shape = ring ]; then
  size=4
  case $node in
    1) rv=10.60.0.1; $ip route add 10.60.1.0/24 via 10.60.0.2 ;;
    2) rv=10.60.0.1; echo 1 >/proc/sys/net/ipv4/ip_forward ;;
    3) rv=10.60.0.1; $ip route add 10.60.0.0/24 via 10.60.1.2 ;;
    4) rv=10.60.3.1 ;;
  esac
else
  size=3
  case $node in 1|2) rv=10.60.0.1 ;; 3) rv=10.60.1.1 ;; esac
fi
export SPARK_HOST=vm$node SPARKNET_ROCE_TIMEOUT_MS=60000 SPARK_JOIN_TIMEOUT_MS=200000
sleep 20  # every VM up
job() {  # job PORT SIZE RANK CASE [VAR=value...]
  p=$1 s=$2 r=$3 c=$4; shift 4
  env SPARK_RANK=$r SPARK_SIZE=$s SPARK_RENDEZVOUS=$rv:$p "$@" \
    allreduce_perf -b 1K -e 4M -f 16 -n 3 -w 1 --csv >/tmp/b.out 2>&1
  rc=$?
  env SPARK_RANK=$r SPARK_SIZE=$s SPARK_RENDEZVOUS=$rv:$((p + 1)) "$@" \
    allreduce_perf -b 16M -e 16M -n 2 -w 1 --csv >>/tmp/b.out 2>&1
  rc=$((rc + $?))
  [ $r -eq 0 ] && awk -F, -v c="$c" '$1 == "allreduce" {print "BENCH," c "," $3 "," $4 "," $9}' /tmp/b.out
  [ $rc -eq 0 ] || { echo "BENCH_FAIL $c"; cat /tmp/b.out; }
}
job 29701 $size $rank ${shape}_roce
job 29711 $size $rank ${shape}_tcp SPARK_TRANSPORT=tcp SPARK_DATA_NET=10.60.0.0/16
if [ $shape = ring ]; then
  # 3 ranks on nodes 1, 2, 3 (node 4 idle): a line, 1 <-> 3 through node 2's relay; compared
  # with the triangle's 3 ranks where every pair is direct.
  [ $node -le 3 ] && job 29721 3 $rank line3_roce
fi
exit 0
