#!/bin/bash
# Soak of wire and process faults on 3 network-namespace hosts (run inside netns_fixture.sh;
# bench/wire_soak.sh starts it): JOBS jobs one after another, each a 3-rank tcp job of
# fault_stream's mixed collectives with one random fault on a random host:
#   loss1 loss5 loss20  iptables statistic loss on every host's data plane (12 rounds)
#   partition           the host's data plane dropped mid-job (timeout 2 s)
#   control             the host's control plane dropped mid-job (daemon not the agent's child)
#   heal                the host's data plane dropped for 1 s mid-job (timeout 4 s)
#   kill_rank           the host's rank SIGKILLed mid-job
#   stop_rank           the host's rank SIGSTOPped mid-job (timeout 2 s)
#   kill_daemon         the host's node daemon SIGKILLed mid-job
# Each job is judged (wire_lib.sh finish, plus the fault's own expectation): "correct"
# (completed, every result checked), "fail-stop" (the documented end: records naming a lane
# and, for a partition, a peer across the cut; the lost host or killed rank named), or
# "else" (a hang, a wrong result, a leftover, a wrong or missing report). Prints one line per
# job, then the counts per fault; exits 1 when any job is "else" or anything is left behind
# (processes, iptables rules, job directories).
#   wire_soak.sh SPARKRUN FAULT_STREAM [JOBS] [SEED] [JSON] [VARIANT]
set -u
sparkrun=$1 prog=$2 jobs=${3:-200} seed=${4:-1} json=${5:-} variant=${6:-quiet}
out=$(mktemp -d /tmp/wiresoak.XXXXXX)
marker="wsmark$$"
. "$(dirname "$0")/wire_lib.sh"
launcher=
trap wire_cleanup EXIT
trap 'exit 130' INT TERM HUP
command -v iptables >/dev/null || { echo "SKIP: no iptables (scripts/deps --test installs it)"; exit 77; }
mkdir -p "$out/tmp"
export TMPDIR=$out/tmp  # the job directories: checked empty at the end
faults=(loss1 loss5 loss20 partition control heal kill_rank stop_rank kill_daemon)
declare -A n_correct n_stop n_else ms_sum
for f in "${faults[@]}"; do n_correct[$f]=0 n_stop[$f]=0 n_else[$f]=0 ms_sum[$f]=0; done
rank_pid() {  # NS -> the pid of the rank there
  local pid
  for pid in $(ip netns pids "$1"); do
    grep -qa "$marker" "/proc/$pid/cmdline" 2>/dev/null && { echo "$pid"; return; }
  done
}
daemon_pid() { pgrep -o -f -- "--daemon .*--host $1\$"; }

for i in $(seq 1 "$jobs"); do
  RANDOM=$((seed * 100003 + i * 7919))
  fault=${faults[$((RANDOM % ${#faults[@]}))]}
  h=$((RANDOM % 3 + 1))
  host=$(eval echo "\$MH_NS$h") r=$((h - 1))
  delay=$(printf '0.%03d' $((200 + RANDOM % 800)))
  name=job$i
  extra= note=
  case $fault in
  loss*)
    for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do loss "$ns" "${fault#loss}"; done
    start "$name" 10000 12 ;;
  partition | stop_rank) start "$name" 2000 1000000 ;;
  control) start "$name" 10000 1000000 "$MH_AGENT setsid --fork --wait"; extra=$host ;;
  heal) start "$name" 4000 400 ;;
  kill_rank) start "$name" 10000 1000000 ;;
  kill_daemon) start "$name" 10000 1000000; extra=$host ;;
  esac
  if [ "${fault#loss}" = "$fault" ]; then
    wait_for 30 ranks_up || note="ranks did not start"
    sleep "$delay"
    t_fault=$(now_ms)
    case $fault in
    partition) cut_data "$host" ;;
    control) cut_control "$host" ;;
    heal) cut_data "$host"; sleep 1; rules_clear ;;
    kill_rank) kill -9 "$(rank_pid "$host")" ;;
    stop_rank) kill -STOP "$(rank_pid "$host")" ;;
    kill_daemon) kill -9 "$(daemon_pid "$host")" ;;
    esac
  fi
  if [ "$fault" = kill_rank ]; then finish "$name" "" "$r"; else finish "$name" "$extra"; fi
  ok=$?
  rules_clear
  verdict=else
  if [ -n "$note" ]; then
    why="$name: $note"
  elif [ "$ok" = 0 ]; then
    verdict=$outcome
    case $fault in
    partition)
      [ "$outcome" = fail-stop ] || { verdict=else why="$name: completed across a partition"; }
      bad=$(records_cross "$name" "$r") || { verdict=else why="$name: $bad, not across the cut of host $h nor a consequence"; }
      gone=$(( t_start + took_ms - t_fault ))  # the launcher ends after the last rank
      [ "$gone" -le 4000 ] || [ "$verdict" = else ] || { verdict=else why="$name: ended $gone ms after the cut (timeout 2 s + 2 s)"; } ;;
    heal) [ "$outcome" = completed ] || { verdict=else why="$name: a healed 1 s cut failed the job"; } ;;
    control | kill_daemon | kill_rank | stop_rank)
      [ "$outcome" = fail-stop ] || { verdict=else why="$name: exit 0 after $fault"; } ;;
    esac
  fi
  case $verdict in
  completed) n_correct[$fault]=$(( ${n_correct[$fault]} + 1 )) ;;
  fail-stop) n_stop[$fault]=$(( ${n_stop[$fault]} + 1 )) ;;
  *) n_else[$fault]=$(( ${n_else[$fault]} + 1 )); echo "ELSE: $why"; tail -5 "$out/$name.e" ;;
  esac
  ms_sum[$fault]=$(( ${ms_sum[$fault]} + took_ms ))
  echo "$name $fault host $h: $verdict (exit $rc, $took_ms ms)"
  rm -f "$out/$name.o" "$out/$name.e"
done

left_rules=0
for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
  left_rules=$(( left_rules + $(ip netns exec "$ns" iptables -w -S | grep -c '^-A') ))
done
left_procs=$(ip netns pids "$MH_NS1"; ip netns pids "$MH_NS2"; ip netns pids "$MH_NS3")
left_dirs=$(find "$out/tmp" -mindepth 1 | wc -l)
printf '\n%-12s %5s %9s %9s %5s %9s\n' fault jobs correct fail-stop else "mean ms"
total_else=0 rows=
for f in "${faults[@]}"; do
  n=$(( ${n_correct[$f]} + ${n_stop[$f]} + ${n_else[$f]} ))
  [ "$n" -gt 0 ] || continue
  total_else=$(( total_else + ${n_else[$f]} ))
  printf '%-12s %5d %9d %9d %5d %9d\n' "$f" "$n" "${n_correct[$f]}" "${n_stop[$f]}" "${n_else[$f]}" $(( ${ms_sum[$f]} / n ))
  rows+="{\"what\": \"$f: jobs $n, correct ${n_correct[$f]}, fail-stop ${n_stop[$f]}\", \"unit\": \"jobs\", \"ours\": ${n_else[$f]}, \"target\": {\"op\": \"<=\", \"value\": 0}}"$'\n'
done
echo "left behind: $left_rules iptables rules, $(echo -n "$left_procs" | grep -c .) processes, $left_dirs job-dir entries"
if [ -n "$json" ]; then
  printf '%s' "$rows" | python3 "$(dirname "$0")/../../bench/results.py" write "$json" --bench wire_soak \
    --variant "$variant" --command "bench/wire_soak.sh BUILD $jobs $seed $variant" \
    --note "$jobs jobs on 3 netns hosts, seed $seed; 'ours' = jobs that ended in anything else than correct or the documented fail-stop; left behind: $left_rules rules, $(echo -n "$left_procs" | grep -c .) processes, $left_dirs job-dir entries"
fi
[ "$total_else" = 0 ] && [ "$left_rules" = 0 ] && [ -z "$left_procs" ] && [ "$left_dirs" = 0 ] ||
  { echo "FAIL: $total_else jobs ended otherwise, or something was left behind"; exit 1; }
echo "PASS: wire_soak"
