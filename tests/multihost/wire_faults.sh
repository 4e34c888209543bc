#!/bin/bash
# Faults of the wire on 3 network-namespace hosts (run inside netns_fixture.sh, which exports
# MH_*): each case is one job of 3 ranks, one per host, running a stream of mixed collectives
# over tcp with every element of every result checked (fault_stream mixed), bounded by
# `timeout`. A case passes when the job either completes with every rank correct, or ends by
# fail-stop with records that name a tcp lane; WRONG DATA or a hang fails it, and so does any
# process left in a namespace. The cases (docs/reliability.md, "Faults of the wire"):
#   clean        no fault: the reference time for the slowdowns
#   loss P       iptables `statistic` drops P % of the packets every host sends on the data
#                plane (to the other hosts, not to the launcher), 1, 5 and 20 %
#   partition    host b's data plane dropped both ways mid-job (2 s timeout): every rank on
#                every host is gone within timeout + 2 s, and every record names a peer
#                across the cut
#   control      host b's control plane (its link to the launcher) dropped mid-job, its data
#                plane intact: host b's daemon ends its ranks itself (the launch agent is not
#                its parent, as with ssh), nothing is left, the launcher names host b and exits
#                non-zero, within the control link's 10 s silence + 5 s
#   heal         host b's data plane dropped for 1 s, less than the 4 s timeout: the job
#                completes, every result correct
# Every rule is removed when its case ends and on every exit path (trap); the fixture then
# removes the namespaces.
#   wire_faults.sh SPARKRUN FAULT_STREAM
set -u
sparkrun=$1 prog=$2
out=$(mktemp -d /tmp/wirefaults.XXXXXX)
marker="wfmark$$"
launcher=
cleanup() {
  [ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null
  local ns
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    ip netns exec "$ns" iptables -w -F INPUT 2>/dev/null
    ip netns exec "$ns" iptables -w -F OUTPUT 2>/dev/null
  done
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
command -v iptables >/dev/null || { echo "SKIP: no iptables (scripts/deps --test installs it)"; exit 77; }
ip netns exec "$MH_NS1" iptables -w -S OUTPUT >/dev/null 2>&1 ||
  { echo "SKIP: iptables does not work in a network namespace here: $(ip netns exec "$MH_NS1" iptables -w -S 2>&1 | head -1)"; exit 77; }

fail() { echo "FAIL: $*"; for f in "$out"/*.e; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
ipt() { local ns=$1; shift; ip netns exec "$ns" iptables -w "$@" || fail "iptables $* in $ns"; }
rules_clear() {
  local ns
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do ipt "$ns" -F INPUT; ipt "$ns" -F OUTPUT; done
}
ranks_in() {  # NS -> how many ranks of this script's jobs run there
  local n=0 pid
  for pid in $(ip netns pids "$1"); do grep -qa "$marker" "/proc/$pid/cmdline" 2>/dev/null && n=$((n + 1)); done
  echo $n
}
ranks_up() { [ "$(ranks_in "$MH_NS1")$(ranks_in "$MH_NS2")$(ranks_in "$MH_NS3")" = 111 ]; }
no_ranks() { [ "$(ranks_in "$MH_NS1")$(ranks_in "$MH_NS2")$(ranks_in "$MH_NS3")" = 000 ]; }
ns_empty() { [ -z "$(ip netns pids "$MH_NS1")$(ip netns pids "$MH_NS2")$(ip netns pids "$MH_NS3")" ]; }
wait_for() {  # SECONDS COMMAND...
  local end=$(( $(now_ms) + $1 * 1000 )); shift
  until "$@"; do [ "$(now_ms)" -lt "$end" ] || return 1; sleep 0.05; done
}
# The data plane of host NS: every packet on eth0 but those to and from the launcher.
cut_data() { ipt "$1" -I INPUT -i eth0 ! -s "$MH_LAUNCHER_ADDR" -j DROP; ipt "$1" -I OUTPUT -o eth0 ! -d "$MH_LAUNCHER_ADDR" -j DROP; }
cut_control() { ipt "$1" -I INPUT -i eth0 -s "$MH_LAUNCHER_ADDR" -j DROP; ipt "$1" -I OUTPUT -o eth0 -d "$MH_LAUNCHER_ADDR" -j DROP; }

# start NAME TIMEOUT_MS ROUNDS [AGENT]: the job in the background ($launcher), bounded by 120 s.
start() {
  local name=$1 tmo=$2 rounds=$3 agent=${4:-$MH_AGENT}
  t_start=$(now_ms)
  timeout -k 5 120 "$sparkrun" --launch-agent "$agent" --control-net "$MH_NET" -n 3 --host "$MH_HOSTS" \
    --kill-grace 0.5 -x SPARK_TRANSPORT=tcp -x SPARKNET_ROCE_TIMEOUT_MS="$tmo" \
    "$prog" mixed "$rounds" 65536 "$marker" >"$out/$name.o" 2>"$out/$name.e" &
  launcher=$!
}
# finish NAME [LOST_HOST_OK]: waits for the job; sets rc and took_ms; fails on a hang, a wrong result, a
# record without a lane, or leftovers; prints the outcome (completed / fail-stop).
finish() {
  local name=$1 lost_host_ok=${2:-}
  wait "$launcher"
  rc=$? launcher=
  took_ms=$(( $(now_ms) - t_start ))
  [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "$name: the job hung (killed by timeout after 120 s)"
  grep -q "WRONG DATA" "$out/$name.o" && fail "$name: a wrong result: $(grep -m1 'WRONG DATA' "$out/$name.o")"
  wait_for 10 ns_empty || fail "$name: processes left in a namespace: $(ip netns pids "$MH_NS1") $(ip netns pids "$MH_NS2") $(ip netns pids "$MH_NS3")"
  if [ "$rc" = 0 ]; then
    [ "$(grep -c '^COMPLETED rank [0-2] mixed' "$out/$name.o")" = 3 ] || fail "$name: exit 0 without 3 ranks completed"
    outcome=completed
    stream_ms=$(sed -n 's/^COMPLETED rank [0-2] mixed [0-9]* in \([0-9]*\) ms$/\1/p' "$out/$name.o" | sort -n | tail -1)
  else
    grep -q "aborted: rank [0-2]: .* on lane tcp:[0-9]" "$out/$name.e" ||
      { [ -n "$lost_host_ok" ] && grep -q "^sparkrun: host $MH_NS2: " "$out/$name.e"; } ||
      fail "$name: exit $rc without a record naming a lane"
    outcome=fail-stop
  fi
}
# dropped NS: packets the DROP rules of NS dropped so far (the fault was injected).
dropped() { ip netns exec "$1" iptables -w -L -v -x -n | awk '$3 == "DROP" {n += $1} END {print n + 0}'; }
# records NAME: the records' "REPORTER PEER" pairs (rank R: ... no data from rank P).
records() { sed -n 's/.*aborted: rank \([0-9]\): .*no data from rank \([0-9]\) on lane tcp:[0-9].*/\1 \2/p' "$out/$1.e"; }
row() { printf '%-12s %-10s %8s ms  %s\n' "$1" "$2" "$3" "$4"; }

echo "case         outcome       time     notes"
# clean: the reference. Slowdowns compare the ranks' own stream time per round (the job's
# start is not in it); 20 % loss runs fewer rounds (each lost segment waits for a retransmit).
rounds=30
start clean 10000 $rounds
finish clean
[ "$outcome" = completed ] || fail "clean: the job failed without a fault (exit $rc)"
clean_ms=$stream_ms
row clean "$outcome" "$stream_ms" "$rounds rounds x 5 collectives (job $took_ms ms with its start)"

for p in 1 5 20; do
  rounds=30
  [ "$p" = 20 ] && rounds=12
  prob=$(printf '0.%02d' "$p")
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    ipt "$ns" -A OUTPUT -o eth0 ! -d "$MH_LAUNCHER_ADDR" -m statistic --mode random --probability "$prob" -j DROP
  done
  start "loss$p" 10000 $rounds
  finish "loss$p"
  n=0
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do n=$(( n + $(dropped "$ns") )); done
  rules_clear
  [ "$n" -gt 0 ] || fail "loss$p: the rules dropped no packet (the fault was not injected)"
  if [ "$outcome" = completed ]; then
    row "loss $p%" "$outcome" "$stream_ms" "$n packets dropped, $rounds rounds, $(awk "BEGIN{printf \"%.1f\", $stream_ms / $rounds / ($clean_ms / 30)}")x clean per round"
  else
    row "loss $p%" "$outcome" "$took_ms" "$n packets dropped: $(grep -m1 'aborted: ' "$out/loss$p.e" | cut -c1-100)"
  fi
done

# partition of host b's data plane: every rank gone within timeout + 2 s.
start partition 2000 1000000
wait_for 30 ranks_up || fail "partition: ranks did not start"
sleep 1.5
cut_data "$MH_NS2"
t_cut=$(now_ms)
wait_for 30 no_ranks || fail "partition: ranks still run 30 s after the cut"
gone_ms=$(( $(now_ms) - t_cut ))
finish partition
exit_ms=$(( $(now_ms) - t_cut ))
n=$(dropped "$MH_NS2")
rules_clear
[ "$n" -gt 0 ] || fail "partition: the cut dropped no packet"
[ "$outcome" = fail-stop ] || fail "partition: the job completed across a partition"
pairs=$(records partition)
[ -n "$pairs" ] || fail "partition: no record names a peer on a tcp lane"
echo "$pairs" | while read -r who peer; do
  [ "$who" = 1 ] || [ "$peer" = 1 ] || { echo "FAIL: partition: rank $who's record names rank $peer, not across the cut"; exit 1; }
done || fail "partition: a record names a peer on the same side of the cut"
[ "$gone_ms" -le 4000 ] || fail "partition: the last rank ended $gone_ms ms after the cut (timeout 2000 ms + 2 s)"
row partition "$outcome" "$gone_ms" "every rank gone after the cut (exit $rc at $exit_ms ms); records: $(echo $pairs | tr ' ' ',')"

# control plane of host b only: its daemon (not a child of the agent) ends its ranks itself.
start control 10000 1000000 "$MH_AGENT setsid --fork --wait"
wait_for 30 ranks_up || fail "control: ranks did not start"
sleep 1
cut_control "$MH_NS2"
t_cut=$(now_ms)
wait_for 25 eval '[ -z "$(ip netns pids "$MH_NS2")" ]' || fail "control: host b's daemon or ranks still run 25 s after the cut"
b_ms=$(( $(now_ms) - t_cut ))
finish control lost_host_ok
exit_ms=$(( $(now_ms) - t_cut ))
rules_clear
[ "$rc" != 0 ] || fail "control: exit 0 although host b was lost"
grep -q "^sparkrun: host $MH_NS2: \(lost the node daemon\|the node daemon exited\)" "$out/control.e" ||
  fail "control: the launcher did not name host b as lost"
[ "$b_ms" -le 15000 ] || fail "control: host b emptied $b_ms ms after the cut (link timeout 10 s + 5 s)"
[ "$exit_ms" -le 20000 ] || fail "control: the launcher ended $exit_ms ms after the cut"
row control "$outcome" "$b_ms" "host b empty after the cut; launcher exit $rc at $exit_ms ms: $(grep -m1 "host $MH_NS2: " "$out/control.e" | cut -c1-90)"

# a 1 s partition of host b's data plane, healed before the 4 s timeout: completes.
# 400 rounds: about 3 s on a clean link here, so the cut lands mid-stream.
start heal 4000 400
wait_for 30 ranks_up || fail "heal: ranks did not start"
sleep 0.5
cut_data "$MH_NS2"
sleep 1
n=$(dropped "$MH_NS2")
rules_clear
finish heal
[ "$n" -gt 0 ] || fail "heal: the cut dropped no packet (the job was not running?)"
[ "$outcome" = completed ] || fail "heal: a 1 s partition under a 4 s timeout failed the job (exit $rc)"
row heal "$outcome" "$stream_ms" "400 rounds, host b cut off for 1 s ($n packets dropped)"
echo "PASS: wire_faults"
