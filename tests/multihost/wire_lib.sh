# Shared by the wire-fault scripts (wire_faults.sh, wire_soak.sh), sourced inside
# netns_fixture.sh (MH_*): jobs of fault_stream's mixed collectives over tcp on the 3
# namespace hosts, iptables faults inside a host's namespace, and the verdict on a job.
# The caller sets sparkrun, prog (fault_stream), out (a folder for the jobs' output) and
# marker (in every rank's command line), and clears the rules on every exit path.
# The EXIT trap of both scripts: the launcher ($launcher) killed, every rule flushed (quietly:
# a namespace may be gone), the output folder removed.
wire_cleanup() {
  [ -n "$launcher" ] && kill -9 "$launcher" 2>/dev/null
  local ns
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    ip netns exec "$ns" iptables -w -F INPUT 2>/dev/null
    ip netns exec "$ns" iptables -w -F OUTPUT 2>/dev/null
  done
  rm -rf "$out"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
ipt() { local ns=$1; shift; ip netns exec "$ns" iptables -w "$@" || { echo "iptables $* in $ns failed"; return 1; }; }
rules_clear() {
  local ns ok=0
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do ipt "$ns" -F INPUT && ipt "$ns" -F OUTPUT || ok=1; done
  return $ok
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
cut_data() { ipt "$1" -I INPUT -i eth0 ! -s "$MH_LAUNCHER_ADDR" -j DROP && ipt "$1" -I OUTPUT -o eth0 ! -d "$MH_LAUNCHER_ADDR" -j DROP; }
# Its control plane: its link to the launcher.
cut_control() { ipt "$1" -I INPUT -i eth0 -s "$MH_LAUNCHER_ADDR" -j DROP && ipt "$1" -I OUTPUT -o eth0 -d "$MH_LAUNCHER_ADDR" -j DROP; }
# loss NS PERCENT: drop that share of what NS sends on its data plane (iptables statistic).
loss() { ipt "$1" -A OUTPUT -o eth0 ! -d "$MH_LAUNCHER_ADDR" -m statistic --mode random --probability "$(printf '0.%02d' "$2")" -j DROP; }

# start NAME TIMEOUT_MS ROUNDS [AGENT]: the job in the background ($launcher), bounded by 120 s.
start() {
  local name=$1 tmo=$2 rounds=$3 agent=${4:-$MH_AGENT}
  t_start=$(now_ms)
  # A failed job's report (flight recorders) goes to the jobs' folder, not the working one.
  SPARK_REPORT_DIR=$out timeout -k 5 120 "$sparkrun" --launch-agent "$agent" --control-net "$MH_NET" -n 3 --host "$MH_HOSTS" \
    --kill-grace 0.5 -x SPARK_TRANSPORT=tcp -x SPARKNET_ROCE_TIMEOUT_MS="$tmo" \
    "$prog" mixed "$rounds" 65536 "$marker" >"$out/$name.o" 2>"$out/$name.e" &
  launcher=$!
}
# finish NAME [LOST_HOST] [KILLED_RANK]: waits for the job; sets rc, took_ms, outcome
# (completed / fail-stop) and stream_ms (completed: the slowest rank's stream time). Returns 1
# with $why on a hang, a wrong result, leftovers, or a failure without a record that names a
# tcp lane (or, with LOST_HOST, a launcher line naming that host; with KILLED_RANK, the line
# that names the rank's death).
finish() {
  local name=$1 lost_host=${2:-} killed=${3:-}
  wait "$launcher"
  rc=$? launcher=
  took_ms=$(( $(now_ms) - t_start ))
  why=
  if [ "$rc" = 124 ] || { [ "$rc" = 137 ] && [ -z "$killed" ]; }; then
    why="$name: the job hung (killed by timeout after 120 s)"
  elif grep -q "WRONG DATA" "$out/$name.o"; then
    why="$name: a wrong result: $(grep -m1 'WRONG DATA' "$out/$name.o")"
  elif ! wait_for 10 ns_empty; then
    why="$name: processes left in a namespace: $(ip netns pids "$MH_NS1") $(ip netns pids "$MH_NS2") $(ip netns pids "$MH_NS3")"
  elif [ "$rc" = 0 ]; then
    outcome=completed
    [ "$(grep -c '^COMPLETED rank [0-2] mixed' "$out/$name.o")" = 3 ] || why="$name: exit 0 without 3 ranks completed"
    stream_ms=$(sed -n 's/^COMPLETED rank [0-2] mixed [0-9]* in \([0-9]*\) ms$/\1/p' "$out/$name.o" | sort -n | tail -1)
  else
    outcome=fail-stop
    grep -q "aborted: rank [0-2]: .* on lane tcp:[0-9]" "$out/$name.e" ||
      { [ -n "$lost_host" ] && grep -q "^sparkrun: host $lost_host: " "$out/$name.e"; } ||
      { [ -n "$killed" ] && grep -q "rank $killed (pid [0-9]*) was killed by signal 9" "$out/$name.e"; } ||
      why="$name: exit $rc without a record naming a lane"
  fi
  [ -z "$why" ]
}
# dropped NS: packets the DROP rules of NS dropped so far (the fault was injected).
dropped() { ip netns exec "$1" iptables -w -L -v -x -n | awk '$3 == "DROP" {n += $1} END {print n + 0}'; }
# records_cross NAME RANK: every record of the job names a peer across the cut of RANK's host
# (RANK names a peer, or a peer names RANK), or names a rank whose own record does: a
# consequence of that rank leaving (docs/fail-stop.md, "Reading a failure record"). Prints the
# first record that does neither.
records_cross() {
  records "$1" | awk -v cut="$2" '{ who[NR] = $1; peer[NR] = $2; named[$1] = $2 }
    END { for (i = 1; i <= NR; i++) {
            if (who[i] == cut || peer[i] == cut) continue
            if ((peer[i] in named) && named[peer[i]] == cut) continue
            print "rank " who[i] " names rank " peer[i]; exit 1 } }'
}
# records NAME: the records' "REPORTER PEER" pairs (rank R: ... no data from rank P).
records() { sed -n 's/.*aborted: rank \([0-9]\): .*no data from rank \([0-9]\) on lane tcp:[0-9].*/\1 \2/p' "$out/$1.e"; }
