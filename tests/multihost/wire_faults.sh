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
. "$(dirname "$0")/wire_lib.sh"
launcher=
trap wire_cleanup EXIT
trap 'exit 130' INT TERM HUP
command -v iptables >/dev/null || { echo "SKIP: no iptables (scripts/deps --test installs it)"; exit 77; }
ip netns exec "$MH_NS1" iptables -w -S OUTPUT >/dev/null 2>&1 ||
  { echo "SKIP: iptables does not work in a network namespace here: $(ip netns exec "$MH_NS1" iptables -w -S 2>&1 | head -1)"; exit 77; }

fail() { echo "FAIL: $*"; for f in "$out"/*.e; do [ -f "$f" ] && { echo "--- $f"; tail -15 "$f"; }; done; exit 1; }
row() { printf '%-12s %-10s %8s ms  %s\n' "$1" "$2" "$3" "$4"; }

echo "case         outcome       time     notes"
# clean: the reference. Slowdowns compare the ranks' own stream time per round (the job's
# start is not in it); 20 % loss runs fewer rounds (each lost segment waits for a retransmit).
rounds=30
start clean 10000 $rounds
finish clean || fail "$why"
[ "$outcome" = completed ] || fail "clean: the job failed without a fault (exit $rc)"
clean_ms=$stream_ms
row clean "$outcome" "$stream_ms" "$rounds rounds x 5 collectives (job $took_ms ms with its start)"

for p in 1 5 20; do
  rounds=30
  [ "$p" = 20 ] && rounds=12
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do loss "$ns" "$p" || fail "iptables: see above"; done
  start "loss$p" 10000 $rounds
  finish "loss$p" || fail "$why"
  n=0
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do n=$(( n + $(dropped "$ns") )); done
  rules_clear || fail "iptables: see above"
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
cut_data "$MH_NS2" || fail "iptables: see above"
t_cut=$(now_ms)
wait_for 30 no_ranks || fail "partition: ranks still run 30 s after the cut"
gone_ms=$(( $(now_ms) - t_cut ))
finish partition || fail "$why"
exit_ms=$(( $(now_ms) - t_cut ))
n=$(dropped "$MH_NS2")
rules_clear || fail "iptables: see above"
[ "$n" -gt 0 ] || fail "partition: the cut dropped no packet"
[ "$outcome" = fail-stop ] || fail "partition: the job completed across a partition"
pairs=$(records partition)
[ -n "$pairs" ] || fail "partition: no record names a peer on a tcp lane"
bad=$(records_cross partition 1) || fail "partition: $bad, on the same side of the cut, and rank $(echo "$bad" | awk '{print $5}')'s record does not name rank 1"
[ "$gone_ms" -le 4000 ] || fail "partition: the last rank ended $gone_ms ms after the cut (timeout 2000 ms + 2 s)"
row partition "$outcome" "$gone_ms" "every rank gone after the cut (exit $rc at $exit_ms ms); records: $(echo $pairs | tr ' ' ',')"

# control plane of host b only: its daemon (not a child of the agent) ends its ranks itself.
start control 10000 1000000 "$MH_AGENT setsid --fork --wait"
wait_for 30 ranks_up || fail "control: ranks did not start"
sleep 1
cut_control "$MH_NS2" || fail "iptables: see above"
t_cut=$(now_ms)
wait_for 25 eval '[ -z "$(ip netns pids "$MH_NS2")" ]' || fail "control: host b's daemon or ranks still run 25 s after the cut"
b_ms=$(( $(now_ms) - t_cut ))
finish control "$MH_NS2" || fail "$why"
exit_ms=$(( $(now_ms) - t_cut ))
rules_clear || fail "iptables: see above"
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
cut_data "$MH_NS2" || fail "iptables: see above"
sleep 1
n=$(dropped "$MH_NS2")
rules_clear || fail "iptables: see above"
finish heal || fail "$why"
[ "$n" -gt 0 ] || fail "heal: the cut dropped no packet (the job was not running?)"
[ "$outcome" = completed ] || fail "heal: a 1 s partition under a 4 s timeout failed the job (exit $rc)"
row heal "$outcome" "$stream_ms" "400 rounds, host b cut off for 1 s ($n packets dropped)"
echo "PASS: wire_faults"
