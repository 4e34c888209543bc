#!/bin/bash
# Multi-host scenarios, run inside netns_fixture.sh (which exports MH_*).
#   scenarios.sh NAME SPARKRUN MH_RANK [EXAMPLES_DIR]
# The launcher runs in the root namespace; the 3 "hosts" are namespaces reached with
# --launch-agent 'ip netns exec {host}'. Each scenario exits 0 on success.
set -u
name=$1 sparkrun=$2 rank=$3 examples=${4:-}
out=$(mktemp -d /tmp/mhtest.XXXXXX)
trap 'rm -rf "$out"' EXIT
export SPARK_REPORT_DIR=$out  # a failed job's report (report.JOBID) goes here, not to the test's folder
marker="mhmark$$"
sr=("$sparkrun" --launch-agent "$MH_AGENT" --control-net "$MH_NET")
run() { "${sr[@]}" "$@"; }  # background jobs use "${sr[@]}" directly so that $! is sparkrun
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$out/o" 2>/dev/null; echo "--- stderr"; cat "$out/e" 2>/dev/null; exit 1; }
expect() { grep -q -- "$1" "$2" || fail "missing '$1' in $2"; }
ns_empty() {  # true when no process is left in any of the 3 namespaces
  [ -z "$(ip netns pids "$MH_NS1")$(ip netns pids "$MH_NS2")$(ip netns pids "$MH_NS3")" ]
}
wait_for() {  # wait_for SECONDS COMMAND...: poll until COMMAND succeeds
  local t=$1; shift
  for _ in $(seq $((t * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
ns_running() {  # every namespace has at least N processes (daemon + ranks)
  local ns
  for ns in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    [ "$(ip netns pids "$ns" | wc -l)" -ge "$1" ] || return 1
  done
}
count_ranks() { pgrep -f "$marker" | wc -l; }
ranks_up() { [ "$(count_ranks)" -ge "$1" ]; }

case "$name" in
hello)
  # One rank per host: identity is the host-list name, local peers only that host's ranks.
  run -n 3 --host "$MH_HOSTS" "$rank" hello >"$out/o" 2>"$out/e" || fail "rc $?"
  for r in 0 1 2; do
    h=$(eval echo "\$MH_NS$((r + 1))")
    expect "hello rank $r size 3 spark_host $h pmix_host $h local_peers $r local_size 1" "$out/o"
  done
  # Slots: a:2,b,c -> ranks 0,1 share host a.
  run -n 4 --host "$MH_NS1:2,$MH_NS2,$MH_NS3" --tag-output "$rank" hello >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "\[0\] hello rank 0 size 4 spark_host $MH_NS1 pmix_host $MH_NS1 local_peers 0,1 local_size 2" "$out/o"
  expect "hello rank 1 size 4 spark_host $MH_NS1 pmix_host $MH_NS1 local_peers 0,1 local_size 2" "$out/o"
  expect "hello rank 3 size 4 spark_host $MH_NS3 pmix_host $MH_NS3 local_peers 3 local_size 1" "$out/o"
  # --map-by node: round robin over the hosts.
  run -n 4 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3" --map-by node "$rank" hello >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "hello rank 3 size 4 spark_host $MH_NS1 pmix_host $MH_NS1 local_peers 0,3 local_size 2" "$out/o"
  expect "hello rank 2 size 4 spark_host $MH_NS3 pmix_host $MH_NS3 local_peers 2 local_size 1" "$out/o"
  [ "$(grep -c '^hello' "$out/o")" = 4 ] || fail "expected 4 hello lines"
  ;;
bind)
  # Binding on daemons: each node binds its own ranks with its own topology and reports it.
  run -n 4 --host "$MH_NS1:2,$MH_NS2:2" --bind-to core --report-bindings "$rank" hello \
    >"$out/o" 2>"$out/e" || fail "rc $?"
  [ "$(grep -c '^hello' "$out/o")" = 4 ] || fail "expected 4 hello lines"
  expect "sparkrun: $MH_NS1 *0 *0 " "$out/e"  # host, rank, core: each node reports its own
  expect "sparkrun: $MH_NS2 *3 *1 " "$out/e"
  grep -q "not available with remote hosts" "$out/e" && fail "binding refused"
  # --nccl-env: each daemon names its own interface towards the launcher (eth0 in its
  # namespace); a value the user set wins.
  run -n 2 --host "$MH_NS1,$MH_NS2" --nccl-env -x GLOO_SOCKET_IFNAME=mine \
    sh -c 'echo "nccl $SPARK_HOST $NCCL_SOCKET_IFNAME $GLOO_SOCKET_IFNAME"' >"$out/o" 2>"$out/e" \
    || fail "rc $?"
  expect "nccl $MH_NS1 eth0 mine" "$out/o"
  expect "nccl $MH_NS2 eth0 mine" "$out/o"
  # --topology plans for one machine only: refused with remote hosts, nothing started.
  run -n 2 --host "$MH_HOSTS" --topology /nonexistent.xml "$rank" hello >"$out/o" 2>"$out/e"
  [ $? = 2 ] || fail "--topology with remote hosts should exit 2"
  ;;
modex)
  # Cross-node fence with data: every rank reads every other rank's key.
  run -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" "$rank" modex >"$out/o" 2>"$out/e" || fail "rc $?"
  [ "$(grep -c 'ok 6/6' "$out/o")" = 6 ] || fail "not every rank saw every key"
  ;;
long_job)
  # Longer than the 10 s link timeout: heartbeats keep both sides content.
  run -n 3 --host "$MH_HOSTS" "$rank" sleep 12 "$marker" >"$out/o" 2>"$out/e" || fail "rc $?"
  [ ! -s "$out/e" ] || fail "unexpected messages"
  ;;
rank_failure)
  # Rank 4 (host c) exits 3 after a fence; the others wait in a fence: group abort everywhere.
  start=$(date +%s)
  run -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" "$rank" exit 3 4 "$marker" >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 3 ] || fail "exit code $rc, want 3"
  # A node daemon's lines name its host (docs/multihost.md): rank 4 runs on host c.
  expect "^sparkrun: host $MH_NS3: rank 4 (pid [0-9]*) exited with status 3; stopping the job$" "$out/e"
  [ $(( $(date +%s) - start )) -lt 30 ] || fail "group abort took too long"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  ;;
abort)
  run -n 3 --host "$MH_HOSTS" "$rank" abort 7 1 "$marker" >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 7 ] || fail "exit code $rc, want 7"
  expect "^sparkrun: host $MH_NS2: rank 1 aborted: mh_rank abort from rank 1" "$out/e"
  expect "^sparkrun: host $MH_NS2: rank 1 (pid [0-9]*) called abort with status 7; stopping the job$" "$out/e"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  ;;
timeout)
  start=$(date +%s)
  run -n 3 --host "$MH_HOSTS" --timeout 3 "$rank" sleep 60 "$marker" >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 124 ] || fail "exit code $rc, want 124"
  expect "timeout: the job ran longer than --timeout 3 s" "$out/e"
  [ $(( $(date +%s) - start )) -lt 30 ] || fail "timeout took too long"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  ;;
kill_daemon)
  # SIGKILL the daemon of host b: group abort naming the host; its ranks die too.
  "${sr[@]}" -n 3 --host "$MH_HOSTS" "$rank" sleep 60 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 3 || fail "ranks did not start"
  # The oldest match: the daemon (its orphan watcher shares its command line and must live on
  # to clean up after it).
  daemon=$(pgrep -o -f -- "--daemon .*--host $MH_NS2\$")
  [ -n "$daemon" ] || fail "no daemon for $MH_NS2"
  kill -9 $daemon
  wait_for 30 bash -c "! kill -0 $launcher 2>/dev/null" || { kill -9 $launcher; fail "launcher did not end"; }
  wait $launcher
  rc=$?
  [ "$rc" != 0 ] || fail "exit code 0 after a daemon died"
  expect "host $MH_NS2: .*node daemon" "$out/e"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  job_dirs() { ls -d "${TMPDIR:-/dev/shm}/sparkrun.$daemon".* 2>/dev/null; }
  wait_for 5 eval '[ -z "$(job_dirs)" ]' || fail "the killed daemon's job dir was left behind: $(job_dirs)"
  ;;
kill_launcher)
  # SIGKILL the launcher: nothing may survive in any namespace.
  "${sr[@]}" -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" "$rank" sleep 60 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 6 || fail "ranks did not start"
  kill -9 $launcher
  t0=$(date +%s%N)
  wait_for 10 ns_empty || fail "processes left in a namespace after the launcher died: $(ps -o pid,ppid,stat,wchan:20,cmd -p "$(echo $(ip netns pids "$MH_NS1") $(ip netns pids "$MH_NS2") $(ip netns pids "$MH_NS3") | tr " " ,)")"
  echo "namespaces empty $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGKILL"
  ;;
kill_launcher_link)
  # Like ssh: the daemon is not the agent's process (setsid --fork), so no parent-death
  # signal reaches it; it must notice the closed control link, kill its ranks and exit
  # within a second.
  sr_link=("$sparkrun" --launch-agent "$MH_AGENT setsid --fork --wait" --control-net "$MH_NET")
  "${sr_link[@]}" -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" "$rank" sleep 60 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 6 || fail "ranks did not start"
  kill -9 $launcher
  t0=$(date +%s%N)
  wait_for 10 ns_empty || fail "processes left after the launcher died: $(ip netns pids "$MH_NS1") $(ip netns pids "$MH_NS2") $(ip netns pids "$MH_NS3")"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "namespaces empty $ms ms after SIGKILL"
  [ "$ms" -lt 3000 ] || fail "daemons took $ms ms (want about 1 s; 3 s allowed on a loaded machine)"
  ;;
link_down)
  # Cut host b's link: both sides notice the silent control link (10 s), the launcher
  # aborts naming the host, and host b's daemon kills its ranks although it still runs.
  "${sr[@]}" -n 3 --host "$MH_HOSTS" "$rank" sleep 90 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 3 || fail "ranks did not start"
  ip link set "$MH_VETH2" down
  wait_for 40 bash -c "! kill -0 $launcher 2>/dev/null" || { kill -9 $launcher; fail "launcher did not end"; }
  wait $launcher
  [ $? != 0 ] || fail "exit code 0 after a lost link"
  # Whichever side notices first: the launcher (heartbeats) or host b's daemon (which
  # then exits; its last words still reach us through the agent's stderr). Both wait 10 s:
  # when the launcher is first it stops the launch agent, and the daemon's last words are
  # then its SIGTERM line (flaky before: 1 run in 3 at load 23, docs/reliability.md). That
  # host b's ranks are gone either way is checked below (ns_empty).
  expect "host $MH_NS2: .*node daemon" "$out/e"
  expect "^sparkrun: host $MH_NS2: control link to the launcher lost\|^sparkrun: host $MH_NS2: got signal 15" "$out/e"
  wait_for 15 ns_empty || fail "processes left in a namespace"
  ;;
bad_clients)
  # While a job runs: a client with a wrong secret and one sending random bytes are
  # rejected and logged; the job finishes normally.
  "${sr[@]}" -v -n 3 --host "$MH_HOSTS" "$rank" sleep 4 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 3 || fail "ranks did not start"
  ep=$(sed -n 's/.*control plane listening on \([0-9.]*:[0-9]*\).*/\1/p' "$out/e" | head -1)
  [ -n "$ep" ] || fail "no control endpoint in --verbose output"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' | { cat; echo; } |
    ip netns exec "$MH_NS3" "$sparkrun" --daemon --connect "$ep" --node 1 --job forged --host intruder \
      >"$out/bad" 2>&1
  [ $? != 0 ] || fail "a daemon with a wrong secret was accepted"
  ip netns exec "$MH_NS3" bash -c "exec 3<>/dev/tcp/${ep%:*}/${ep#*:}; head -c 4096 /dev/urandom >&3; sleep 0.5" 2>/dev/null
  wait $launcher
  rc=$?
  [ "$rc" = 0 ] || fail "job harmed by bad clients: exit $rc"
  expect "control: rejected connection from .*wrong job secret" "$out/e"
  expect "control: rejected connection from .*bad magic" "$out/e"
  ;;
host_names)
  # Every failure line names the host it happened on (docs/multihost.md): a rank killed on
  # host b, and a program that is not there on any host.
  "${sr[@]}" -n 3 --host "$MH_HOSTS" "$rank" sleep 60 "$marker" >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ranks_up 3 || fail "ranks did not start"
  victim=""
  for pid in $(ip netns pids "$MH_NS2"); do
    grep -qa "$marker" "/proc/$pid/cmdline" 2>/dev/null && ! grep -qa -- "--daemon" "/proc/$pid/cmdline" && victim=$pid
  done
  [ -n "$victim" ] || fail "no rank found on $MH_NS2"
  kill -9 "$victim"
  wait $launcher
  [ $? = 137 ] || fail "exit code after SIGKILL of a rank: want 137"
  expect "^sparkrun: host $MH_NS2: rank 1 (pid $victim) was killed by signal 9 (SIGKILL: Killed); stopping the job$" "$out/e"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  run -n 3 --host "$MH_HOSTS" ./nosuch_program >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 127 ] || fail "exit code $rc for a missing program, want 127"
  expect "^sparkrun: host ${MH_NS1%a}[abc]: cannot start rank [0-2]: ./nosuch_program: No such file or directory$" "$out/e"
  grep -q "^sparkrun: cannot start" "$out/e" && fail "a start failure without its host"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  ;;
spark_log)
  # SPARK_LOG=info (launch): the launcher's per-host steps and each daemon's, in the logger's
  # HOST:PID [WHO] prefix (docs/launcher.md); the ranks' lines carry their host too.
  run -n 3 --host "$MH_HOSTS" -x SPARK_LOG=info:launch "$rank" hello >"$out/o" 2>"$out/e" || fail "rc $?"
  for h in "$MH_NS1" "$MH_NS2" "$MH_NS3"; do
    expect "^[^ :]*:[0-9]* \[sparkrun\] launch: host $h: node daemon starting (pid [0-9]*): " "$out/e"
    expect "^[^ :]*:[0-9]* \[sparkrun\] launch: host $h: node daemon connected and authenticated$" "$out/e"
    expect "^$h:[0-9]* \[daemon\] launch: ranks started$" "$out/e"
    expect "^$h:[0-9]* \[daemon\] launch: every rank ended$" "$out/e"
    expect "^[^ :]*:[0-9]* \[sparkrun\] launch: host $h: every rank ended (exit 0)$" "$out/e"
  done
  run -n 3 --host "$MH_HOSTS" "$rank" hello >"$out/o" 2>"$out/e" || fail "rc $?"
  grep -q "launch: " "$out/e" && fail "launch lines at the default level"
  ;;
ompi)
  # An Open MPI program across the hosts (direct launch, cross-node modex through us).
  command -v mpicc.openmpi >/dev/null || { echo "SKIP: no mpicc.openmpi"; exit 77; }
  cat >"$out/mpi.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, len;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  printf("mpi rank=%d size=%d sum=%ld %s\n", rank, size, sum, sum == (long)size * (size + 1) / 2 ? "ok" : "WRONG");
  MPI_Finalize();
  return 0;
}
C
  mpicc.openmpi -O1 -o "$out/mpi" "$out/mpi.c" || fail "mpicc"
  run -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" -x OMPI_MCA_btl=self,tcp -x "OMPI_MCA_btl_tcp_if_include=$MH_NET" \
    "$out/mpi" >"$out/o" 2>"$out/e" || fail "rc $?"
  [ "$(grep -c 'size=6 sum=21 ok' "$out/o")" = 6 ] || fail "not 6 correct ranks"
  ;;
spark_hello)
  [ -x "$examples/hello" ] || { echo "SKIP: examples/hello not built"; exit 77; }
  run -n 3 --host "$MH_HOSTS" -x SPARK_TRANSPORT=tcp "$examples/hello" >"$out/o" 2>"$out/e" || fail "rc $?"
  for r in 0 1 2; do
    expect "hello from rank $r of 3 on $(eval echo "\$MH_NS$((r + 1))") (transport tcp)" "$out/o"
  done
  expect "correct on every rank" "$out/o"
  ;;
settings_differ)
  # A setting every rank must share, set on host b only (as that host's own environment
  # would): the job ends within seconds, naming the setting, its values and the ranks,
  # instead of hanging until init's barrier timeout (docs/fail-stop.md).
  [ -x "$examples/hello" ] || { echo "SKIP: examples/hello not built"; exit 77; }
  wrapper="if [ \"\$SPARK_HOST\" = $MH_NS2 ]; then export SPARK_TCP_LANES=4; fi; exec \"\$0\" \"\$@\""
  t0=$(date +%s%N)
  timeout 60 "${sr[@]}" -n 3 --host "$MH_HOSTS" -x SPARK_TRANSPORT=tcp sh -c "$wrapper" "$examples/hello" \
    >"$out/o" 2>"$out/e"
  rc=$? took=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "exit $rc after $took ms"; cat "$out/e"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "exit $rc, expected a failure at init"
  [ "$took" -lt 15000 ] || fail "took $took ms: a timeout, not the settings check"
  expect "aborted: settings differ between ranks: SPARK_TCP_LANES=4 on rank 1 (host $MH_NS2), 2 on ranks 0,2 (hosts $MH_NS1,$MH_NS3) (give every rank the same value, e.g. with -x SPARK_TCP_LANES=4)" "$out/e"
  grep -q "correct on every rank" "$out/o" && fail "the job ran"
  ;;
collectives)
  # Every collective across the 3 hosts over tcp, results checked, 2 ranks per host.
  [ -x "$examples/allreduce_perf" ] || { echo "SKIP: examples/allreduce_perf not built"; exit 77; }
  for coll in allreduce reduce_scatter allgather broadcast alltoall; do
    run -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" -x SPARK_TRANSPORT=tcp "$examples/allreduce_perf" \
      -t $coll -b 8 -e 4M -f 64 -n 3 -w 1 -c 1 >"$out/o" 2>"$out/e" || fail "$coll: rc $?"
  done
  ;;
link_cut)
  # Cut host b's link in the middle of allreduces: the ranks' fail-stop records name the
  # peer on host b and the tcp lane; the job ends with a group abort.
  [ -x "$examples/allreduce_perf" ] || { echo "SKIP: examples/allreduce_perf not built"; exit 77; }
  "${sr[@]}" -n 3 --host "$MH_HOSTS" -x SPARK_TRANSPORT=tcp -x SPARKNET_ROCE_TIMEOUT_MS=2000 \
    "$examples/allreduce_perf" -b 64K -e 64K -n 1000000 -w 1 -c 0 >"$out/o" 2>"$out/e" &
  launcher=$!
  wait_for 30 ns_running 2 || fail "ranks did not start"
  sleep 2  # let them connect and run allreduces
  ip link set "$MH_VETH2" down
  wait_for 40 bash -c "! kill -0 $launcher 2>/dev/null" || { kill -9 $launcher; fail "launcher did not end"; }
  wait $launcher
  [ $? != 0 ] || fail "exit code 0 after a cut link"
  grep " aborted: " "$out/e" | head -3
  # Host b runs rank 1: the ranks of hosts a and c name it, on a tcp lane, and every record
  # (host b's own comes through its launch agent's stderr) names a peer across the cut.
  grep -q "aborted: rank [02]: .*: no data from rank 1 on lane tcp:[0-9]" "$out/e" \
    || fail "no record of host a or c names rank 1 (host b) on a tcp lane"
  if grep " aborted: " "$out/e" | grep -v "aborted: rank 1: \|no data from rank 1 on lane tcp:"; then
    fail "a record names a peer on the same side of the cut"
  fi
  wait_for 15 ns_empty || fail "processes left in a namespace"
  ;;
restarts)
  # --max-restarts over hosts (docs/launcher.md): rank 4 (host c) exits 3 on attempt 0, the
  # whole group on every host starts again (daemons too) as a new job, and attempt 1 runs clean.
  # Each rank of attempt 1 checks that no process of attempt 0 is left anywhere ("[.]": the
  # pattern does not match the other ranks' pgrep).
  wrap='a=$SPARK_RESTART_COUNT
echo "rank $SPARK_RANK count $a job $SPARK_JOB_ID"
[ "$a" = 0 ] && exec "$0" exit 3 4 "$1.a0"
[ -z "$(pgrep -f "$1[.]a0")" ] || echo "LEFTOVER of attempt 0 at rank $SPARK_RANK"
exec "$0" hello "$1.a1"'
  run -n 6 --host "$MH_NS1:2,$MH_NS2:2,$MH_NS3:2" --max-restarts 2 --restart-backoff 0 \
    sh -c "$wrap" "$rank" "$marker" >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 0 ] || fail "exit code $rc, want 0"
  expect "^sparkrun: attempt 1 of 3 failed: host $MH_NS3: rank 4 (pid [0-9]*) exited with status 3; restarting in 0 s$" "$out/e"
  expect "^sparkrun: attempt 2 of 3 succeeded$" "$out/e"
  [ "$(grep -c ' count 0 ' "$out/o")" = 6 ] || fail "not 6 ranks in attempt 0"
  [ "$(grep -c ' count 1 ' "$out/o")" = 6 ] || fail "not 6 ranks in attempt 1"
  [ "$(grep -c '^hello' "$out/o")" = 6 ] || fail "attempt 1: not 6 hello lines"
  [ "$(grep -o ' job [^ ]*' "$out/o" | sort -u | wc -l)" = 2 ] || fail "not 2 distinct job ids"
  grep -q LEFTOVER "$out/o" && fail "a process of attempt 0 was alive in attempt 1"
  wait_for 15 ns_empty || fail "processes left in a namespace"
  ;;
env_wdir)
  # The environment and directory rules (docs/launcher.md) over a launch agent that clears
  # the environment and starts in / (as ssh does: nothing of ours reaches the daemon).
  clean=("$sparkrun" --launch-agent "$MH_AGENT env -i -C / PATH=/usr/bin:/bin" --control-net "$MH_NET")
  two=(-n 2 --host "$MH_NS1,$MH_NS2" --tag-output)
  # SPARK_* / SPARKNET_* always, -x patterns; a plain variable only with --env-all.
  SPARKNET_ROCE_TIMEOUT_MS=1234 FOO_A=1 FOO_B=2 ENVW_PLAIN=p \
    "${clean[@]}" "${two[@]}" -x 'FOO_*' -x 'ENVW_NOMATCH_*' env >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "^\[1\] SPARKNET_ROCE_TIMEOUT_MS=1234$" "$out/o"
  expect "^\[1\] FOO_A=1$" "$out/o"
  expect "^\[1\] FOO_B=2$" "$out/o"
  grep -q "ENVW_PLAIN" "$out/o" && fail "a plain variable was sent without --env-all"
  expect "sparkrun: warning: -x 'ENVW_NOMATCH_\*' matches no variable" "$out/e"
  # --env-all: everything but the host's own variables (HOSTNAME, PWD, OLDPWD, ...).
  ENVW_PLAIN=p HOSTNAME=launcherhost OLDPWD=/launcher/old PWD=/launcher/pwd \
    "${clean[@]}" "${two[@]}" --env-all env >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "^\[1\] ENVW_PLAIN=p$" "$out/o"
  grep -q "launcherhost\|/launcher/" "$out/o" && fail "--env-all sent a host-specific variable"
  expect "^\[1\] PWD=$(pwd -P)$" "$out/o"  # each rank's PWD is its directory: the launcher's
  here=$(cd "$out" && pwd -P)
  # The directory: this one on every host, so a relative program path works there.
  printf '#!/bin/sh\necho "cwd $(pwd -P)"\n' >"$out/probe.sh"
  chmod +x "$out/probe.sh"
  (cd "$out" && "${clean[@]}" "${two[@]}" ./probe.sh) >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "^\[1\] cwd $here$" "$out/o"
  # --wdir (mpirun's -wdir): chosen; one host (no --host) too, relative program path included.
  "${clean[@]}" "${two[@]}" -wdir /usr pwd >"$out/o" 2>"$out/e" || fail "rc $?"
  expect "^\[1\] /usr$" "$out/o"
  (cd / && "$sparkrun" -n 1 --wdir "$here" ./probe.sh) >"$out/o" 2>"$out/e" || fail "one host: rc $?"
  expect "^cwd $here$" "$out/o"
  # A directory missing on the hosts: the job ends at once, naming the host and the fix.
  start=$(date +%s)
  "${clean[@]}" "${two[@]}" --wdir /nonexistent.envw pwd >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 127 ] || fail "exit code $rc, want 127"
  expect "host \($MH_NS1\|$MH_NS2\): cannot start rank [01]: the working directory /nonexistent.envw does not exist there; .*--wdir DIR" "$out/e"
  [ $(( $(date +%s) - start )) -lt 10 ] || fail "a missing directory took too long"
  wait_for 5 ns_empty || fail "processes left in a namespace"
  "$sparkrun" -n 1 --wdir /nonexistent.envw pwd >"$out/o" 2>"$out/e"
  rc=$?
  [ "$rc" = 2 ] || fail "one host: exit code $rc, want 2"
  expect "wdir /nonexistent.envw: .* is not a directory on this host" "$out/e"
  ;;
*)
  echo "unknown scenario $name"
  exit 2
  ;;
esac
echo "PASS: $name"
