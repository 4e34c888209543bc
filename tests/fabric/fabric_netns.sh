#!/bin/bash
# Switchless fabrics on network namespaces (docs/fabric.md).
#
#   fabric_netns.sh SHAPE SPARKRUN DISCOVER [EXAMPLES_DIR [FABRIC_JOB]]
#   SHAPE: triangle | ring | ring_stall | ring_relay_stall | line
#
# N namespaces (3 for the triangle, 4 for the ring, 5 for the line 0-1-2-3-4). Data: one veth pair per cable, each cable
# its own 10.<S>.<k>.0/30 subnet, no bridge. Control: each namespace has an extra veth into a
# bridge in the root namespace (10.<S>.200.0/24) where the launcher runs; SPARK_DATA_NET keeps
# it out of the data lanes. Runs spark_fabric_discover under sparkrun, checks the map, writes
# it (`sparkrun fabric --write`), checks it matches, then pins a miscabled map and expects sparkrun to refuse (both shown).
# With FABRIC_JOB: triangle and ring run the collectives job over tcp with the runtime map
# (the ring's opposite nodes through the relay); ring_relay_stall SIGSTOPs the destination of
# a flood through the relay (small socket buffers in its namespaces), so that only the relay's
# own stall detection can end the job; ring_stall SIGSTOPs the relay node under a
# job whose opposite nodes exchange through it and expects sparkrun's abort lines naming it.
# line: multi-hop relays (rank 0 reaches rank 4 through 1, 2 and 3): the map, the collectives
# job under a pinned --fabric map, then a flood 0 -> 4 with the middle relay (2) SIGSTOPped:
# relay 1's record names it.
# Exit 77 (skip) without root/iproute2. Everything is removed on exit.
set -u
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: network namespaces need root and iproute2"; exit 77
fi
shape=$1 sparkrun=$2 discover=$3 examples=${4:-} job=${5:-}
case $shape in triangle) n=3; cables="0-1 1-2 2-0" ;; ring|ring_stall|ring_relay_stall) n=4; cables="0-1 1-2 2-3 3-0" ;;
  line) n=5; cables="0-1 1-2 2-3 3-4" ;;
  *) echo "bad shape $shape"; exit 2 ;; esac
case $shape in ring_stall|ring_relay_stall|line)
  [ -x "$job" ] || { echo "SKIP: fabric_job not built"; exit 77; } ;; esac
pfx="fb$$"
. "$(dirname "$0")/switchless_netns.sh"
switchless_pick_subnet
out=$(mktemp -d)
cleanup() {
  switchless_down
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
fail() { echo "FAIL: $*"; for f in "$out"/*; do echo "--- $f"; cat "$f"; done; exit 1; }
expect() { grep -q -- "$1" "$2" || fail "missing '$1' in $2"; }

switchless_up || fail "could not build the namespaces"
base=(--launch-agent 'ip netns exec {host}' --control-net "10.$s.200.0/24"
    -x "SPARK_DATA_NET=10.$s.0.0/17" -x SPARKNET_ROCE_TIMEOUT_MS=20000)
opts=("${base[@]}" -n "$n" --host "$hosts")
sr=("$sparkrun" "${opts[@]}")
fr=("$sparkrun" fabric "${opts[@]}")  # `sparkrun fabric` runs $discover through sparkrun
export SPARK_FABRIC_DISCOVER=$discover

# Starts `fabric_job MODE` (extra sparkrun options after MODE), waits until it runs, SIGSTOPs
# the fabric_job in namespace VNS and expects the job to end by itself, non-zero.
stall_job() {
  local mode=$1 vns=$2; shift 2
  "${sr[@]}" -x SPARK_TRANSPORT=tcp -x SPARKNET_ROCE_TIMEOUT_MS=1500 --kill-grace 1 "$@" \
    "$job" "$mode" >"$out/s" 2>&1 &
  local sr_pid=$! victim="" pid
  for _ in $(seq 300); do grep -q "$mode running" "$out/s" && break; sleep 0.1; done
  grep -q "$mode running" "$out/s" || { kill "$sr_pid"; wait "$sr_pid"; fail "$mode never started"; }
  for pid in $(ip netns pids "$pfx$vns"); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = fabric_job ] && victim=$pid
  done
  [ -n "$victim" ] || fail "no fabric_job in $pfx$vns"
  kill -STOP "$victim"
  # The job must end by itself (bounded: timeout 1.5 s, kill grace 1 s).
  for _ in $(seq 300); do kill -0 "$sr_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$sr_pid" 2>/dev/null; then kill -CONT "$victim"; kill "$sr_pid"; fail "job did not end after rank $vns stopped"; fi
  wait "$sr_pid"
  rc=$?
  [ $rc -ne 0 ] || fail "job exited 0 after rank $vns stopped"
}
small_buffers() {
  for i in "$@"; do
    ip netns exec "$pfx$i" sysctl -q -w net.ipv4.tcp_rmem="4096 16384 32768" \
      net.ipv4.tcp_wmem="4096 16384 32768" || fail "cannot shrink socket buffers"
  done
}

if [ "$shape" = line ]; then
  "${fr[@]}" --write "$out/pin.json" >"$out/o" 2>"$out/e" || fail "discover rc $?"
  expect "${pfx}0 -> ${pfx}1: direct to1(" "$out/o"
  expect "${pfx}0 -> ${pfx}2: relay via ${pfx}1 (2 hops)" "$out/o"
  expect "${pfx}0 -> ${pfx}4: relay via ${pfx}1 (4 hops)" "$out/o"
  expect "${pfx}4 -> ${pfx}0: relay via ${pfx}3 (4 hops)" "$out/o"
  # A pinned map with relays is accepted, and the job runs over multi-hop relays: every
  # collective checked on every rank (no cycle: the direct algorithms through relays).
  "${sr[@]}" --fabric "$out/pin.json" -x SPARK_TRANSPORT=tcp "$job" check >"$out/j" 2>&1 ||
    fail "fabric_job check over the line, pinned: rc $?"
  [ "$(grep -c "fabric_job: rank [0-9]* ok" "$out/j")" = "$n" ] || fail "not every rank checked ok"
  grep "allreduce.*ms\|without the ring" "$out/j"
  # Rank 0 floods rank 4 (both ends' timeouts raised); the middle relay (rank 2) stops. Relay
  # 1 is left holding bytes (small socket buffers in its and rank 2's namespaces) and its
  # record names the stopped relay: rank, host and the lane toward it.
  small_buffers 1 2
  stall_job flood 2 -x FABRIC_JOB_PEER=4
  expect "sparkrun: host ${pfx}1: rank 1 aborted: rank 1: relay seq [1-9][0-9]* step 0: no data from rank 4 on lane tcp:via r2/to2 after [0-9]* ms (timeout 1500 ms) .relay on ${pfx}1 for rank 0 -> rank 4 stalled: next relay rank 2 on ${pfx}2 takes no data" "$out/s"
  grep "^sparkrun: host [^:]*: rank" "$out/s"
  echo "PASS line (rc $rc)"
  exit 0
fi

if [ "$shape" = ring_stall ] || [ "$shape" = ring_relay_stall ]; then
  # ring_stall: ranks 0 and 2 (opposite) ping-pong through rank 1's relay; stop rank 1.
  # ring_relay_stall: rank 0 floods rank 2 through rank 1's relay; stop rank 2. Socket buffers
  # of the relay's and rank 2's namespaces are small, so the relay is left holding bytes.
  if [ "$shape" = ring_relay_stall ]; then
    small_buffers 1 2
    stall_job flood 2
  else
    stall_job pingpong 1
  fi
  if [ "$shape" = ring_stall ]; then
    # Records of the ranks that waited through the relay name its rank and their lane toward
    # it ("tcp:via r1/to1": always fits the record's lane field); the relaying host goes into
    # the record's detail when the wait point passes the transport's lane_detail on.
    expect "sparkrun: host ${pfx}[02]: rank [02] aborted: rank [02]: .* no data from rank [02] on lane tcp:via r1/to1 after [0-9]* ms (timeout 1500 ms) \[relayed by rank 1 on host ${pfx}1\]\$" "$out/s"
  else
    # The relay's own record: relaying rank and host, its lane toward rank 2, the sequence.
    expect "sparkrun: host ${pfx}1: rank 1 aborted: rank 1: relay seq [1-9][0-9]* step 0: no data from rank 2 on lane tcp:to2 after [0-9]* ms (timeout 1500 ms) .relay on ${pfx}1 for rank 0 -> rank 2 stalled" "$out/s"
  fi
  grep "^sparkrun: host [^:]*: rank" "$out/s"
  echo "PASS $shape (rc $rc)"
  exit 0
fi

"${fr[@]}" --write "$out/pin.json" >"$out/o" 2>"$out/e" || fail "discover rc $?"
for c in $cables; do
  a=${c%-*} b=${c#*-}
  expect "$pfx$a -> $pfx$b: direct to$b(" "$out/o"
  expect "$pfx$b -> $pfx$a: direct to$a(" "$out/o"
done
if [ "$shape" = triangle ]; then
  expect "every pair cabled: direct" "$out/o"
else
  expect "relay needed" "$out/o"
  expect "${pfx}0 -> ${pfx}2: relay via ${pfx}1 (2 hops)" "$out/o"
  expect "${pfx}1 -> ${pfx}3: relay via ${pfx}0 (2 hops)" "$out/o"
  expect "${pfx}3 -> ${pfx}1: relay via ${pfx}0 (2 hops)" "$out/o"
fi
grep -q "ctl" "$out/o" && fail "control interface used as a data lane"
expect "\"${pfx}0:to1\"" "$out/pin.json"

# The written file pins the map: a second run matches it.
"${sr[@]}" "$discover" --fabric "$out/pin.json" >"$out/o2" 2>"$out/e2" || fail "pinned run rc $?"
expect "fabric map matches" "$out/o2"

# A pinned map that disagrees with the cabling (0-1 cable moved to 0's "to9") is refused.
sed "s/\"${pfx}0:to1\"/\"${pfx}0:to9\"/" "$out/pin.json" >"$out/bad.json"
"${fr[@]}" --fabric "$out/bad.json" >"$out/o3" 2>"$out/e3"
rc=$?
[ $rc -ne 0 ] || fail "miscabled pin accepted"
expect "missing cable ${pfx}0:to9 <-> ${pfx}1:to0" "$out/e3"
expect "unexpected cable ${pfx}0:to1 <-> ${pfx}1:to0" "$out/e3"
expect "pinned:" "$out/e3"
expect "found:" "$out/e3"
expect "refusing to start" "$out/e3"
# A job started with --fabric: runs when the map matches, is refused (nothing started) when not.
"${sr[@]}" --fabric "$out/pin.json" /bin/echo jobran >"$out/o4" 2>"$out/e4" || fail "pinned job rc $?"
[ "$(grep -c jobran "$out/o4")" = "$n" ] || fail "pinned job did not run on every host"
"${sr[@]}" --fabric "$out/bad.json" /bin/echo jobran >"$out/o5" 2>"$out/e5" && fail "miscabled job started"
grep -q jobran "$out/o5" && fail "a rank ran despite the refusal"
expect "refusing to start: the fabric map does not match" "$out/e5"
expect "missing cable ${pfx}0:to9" "$out/e5"
# Triangle: collectives over per-peer lanes (each peer through its own cable), checked results.
if [ "$shape" = triangle ] && [ -x "$examples/allreduce_perf" ]; then
  rx() { ip -n "$pfx$1" -s -j link show "$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])'; }
  before=$(( $(rx 0 to1) + $(rx 0 to2) + $(rx 1 to2) ))
  for coll in allreduce allgather broadcast; do
    "${sr[@]}" -x SPARK_TRANSPORT=tcp "$examples/allreduce_perf" -t $coll -b 8 -e 1M -f 32 -n 3 -w 1 -c 1 \
      >"$out/c_$coll" 2>&1 || fail "$coll over the triangle: rc $?"
  done
  after=$(( $(rx 0 to1) + $(rx 0 to2) + $(rx 1 to2) ))
  # Every pair's traffic crossed its own cable (MiB-sized messages on each of the 3 links).
  for l in "0 to1" "0 to2" "1 to2"; do
    [ "$(rx $l)" -gt 1000000 ] || fail "link $l carried no collective traffic"
  done
  echo "triangle collectives: $(( (after - before) / 1000000 )) MB over the three cables"
fi
# The collectives job over tcp with the runtime map: every collective checked on every rank
# and identical everywhere; on the ring the opposite nodes go through the relay.
if [ -x "$job" ]; then
  "${sr[@]}" -x SPARK_TRANSPORT=tcp "$job" check >"$out/j" 2>&1 || fail "fabric_job check rc $?"
  [ "$(grep -c "fabric_job: rank [0-9]* ok" "$out/j")" = "$n" ] || fail "not every rank checked ok"
  grep "allreduce.*ms\|without the ring" "$out/j"
  if [ "$shape" = ring ]; then
    # Two ranks per host (shared memory inside a host, tcp and relays between hosts; the
    # first rank of each host probes and relays).
    "$sparkrun" "${base[@]}" -n $((2 * n)) --host "${hosts//,/:2,}:2" "$job" check >"$out/j2" 2>&1 ||
      fail "fabric_job check, 2 ranks per host: rc $?"
    [ "$(grep -c "fabric_job: rank [0-9]* ok" "$out/j2")" = $((2 * n)) ] ||
      fail "not every rank checked ok (2 ranks per host)"
    grep "allreduce.*ms" "$out/j2"
  fi
fi
cat "$out/o" "$out/e3"; echo "PASS $shape"
