#!/usr/bin/env bash
# Two jobs on the same ports (SPARK_TCP_PORT_RANGE, docs/reliability.md). On this host, over
# tcp, 3 ranks per job:
#  1. another program listens on the first 3 ports of a 6-port range (a job holding them, with
#     no SO_REUSEPORT sharing): the job's ranks take the other 3, finish with verified results,
#     and nothing connects to the holder (no rank takes another's listener for a peer);
#  2. every port of the range is taken (3 ports, and one port): the job fails at start with
#     the error naming the busy port(s) and the fix, within seconds, nothing left behind;
#  3. two jobs at once with the same 6-port range: both finish with verified results, every
#     listener in the range, no connection dropped as foreign (each rank dialled its own
#     job's ports only).
#   forced_ports.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
dir=$(mktemp -d /tmp/spark-forced-ports.XXXXXX)
holder=
cleanup() {
  [ -n "$holder" ] && kill "$holder" 2>/dev/null && wait "$holder" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

# 6 free ports below the ephemeral range (outgoing connections do not take them).
in_use() { ss -Htan "( sport >= :$1 and sport <= :$2 )" | grep -q .; }
base=
for _ in $(seq 50); do
  b=$((20000 + RANDOM % 12000))
  in_use "$b" $((b + 5)) || { base=$b; break; }
done
[ -n "$base" ] || fail "no 6 free ports found between 20000 and 32000"
last=$((base + 5))
echo "range $base-$last"

# The holder: listens on every address on base..base+2 (no SO_REUSEADDR / SO_REUSEPORT, as
# another job's listener) and counts the connections it accepts.
python3 - "$base" "$dir" <<'EOF' &
import select, socket, sys, time
base, d = int(sys.argv[1]), sys.argv[2]
ls = []
for p in range(base, base + 3):
    s = socket.socket()
    s.bind(("0.0.0.0", p))
    s.listen(8)
    ls.append(s)
open(d + "/ready", "w").close()
end = time.time() + 120
while time.time() < end:
    for s in select.select(ls, [], [], 0.2)[0]:
        c, a = s.accept()
        open(d + "/accepted", "a").write(f"{a}\n")
        c.close()
EOF
holder=$!
for _ in $(seq 100); do [ -e "$dir/ready" ] && break; sleep 0.1; done
[ -e "$dir/ready" ] || fail "the port holder did not start"

# run NAME RANGE: one 3-rank job over tcp with the forced range, output in $dir/NAME.
run() {
  SPARK_TRANSPORT=tcp SPARK_TCP_PORT_RANGE=$2 SPARK_LOG=info:tcp timeout 60 \
    "$sparkrun" -n 3 --kill-grace 1 "$prog" healthy 2000 "fports$$x$1" >"$dir/$1" 2>&1
}
# ports NAME: the ports the job's listeners took (the tcp info line), sorted.
ports() { sed -n 's/.*tcp: listening on port \([0-9]*\) of SPARK_TCP_PORT_RANGE=.*/\1/p' "$dir/$1" | sort -n | tr '\n' ' '; }
check_ok() {
  [ "$2" -eq 0 ] || { cat "$dir/$1"; fail "$1: exit $2"; }
  [ "$(grep -c '^COMPLETED' "$dir/$1")" -eq 3 ] || { cat "$dir/$1"; fail "$1: not every rank completed"; }
  ! grep -q 'WRONG DATA' "$dir/$1" || fail "$1: wrong data"
  ! grep -q 'tcp: dropped a connection' "$dir/$1" || { cat "$dir/$1"; fail "$1: a foreign connection reached a rank"; }
  for p in $(ports "$1"); do
    [ "$p" -ge "$3" ] && [ "$p" -le "$last" ] || fail "$1: a listener on port $p, outside $3-$last"
  done
  [ "$(ports "$1" | wc -w)" -eq 3 ] || { cat "$dir/$1"; fail "$1: not 3 listeners in the range"; }
  [ -z "$(leftovers "fports$$x$1")" ] || fail "$1: processes left behind"
}

# 1. Half the range is held: the ranks take the free half.
run held "$base-$last"
check_ok held $? $((base + 3))
echo "held: 3 ports held, the job took $(ports held)"
[ ! -e "$dir/accepted" ] || fail "the holder accepted connections: $(cat "$dir/accepted")"

# 2. Every port held: a clean failure at start naming the ports and the fix.
for range in "$base-$((base + 2))" "$((base + 1))"; do
  name=busy${range%-*}
  t0=$(now_ms)
  run "$name" "$range"
  rc=$? took=$(($(now_ms) - t0))
  echo "--- $range: exit $rc in $took ms"; cat "$dir/$name"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$range: exit $rc with every port taken"
  [ "$took" -lt 20000 ] || fail "$range: the failure took $took ms"
  ! grep -q '^COMPLETED' "$dir/$name" || fail "$range: a rank completed"
  case $range in
    *-*) want="every port of $range (SPARK_TCP_PORT_RANGE=$range) is in use on this node" ;;
    *) want="port $range (SPARK_TCP_PORT_RANGE=$range) is in use on this node" ;;
  esac
  grep -qF "$want" "$dir/$name" || fail "$range: no error naming the busy port(s): '$want'"
  grep -qF "widen SPARK_TCP_PORT_RANGE, give each job its own range, or unset it" "$dir/$name" ||
    fail "$range: the error does not say the fix"
  [ -z "$(leftovers "fports$$x$name")" ] || fail "$range: processes left behind"
done
[ ! -e "$dir/accepted" ] || fail "the holder accepted connections: $(cat "$dir/accepted")"
kill "$holder"; wait "$holder" 2>/dev/null; holder=

# 3. Two jobs at once on the same range.
run a "$base-$last" & pa=$!
run b "$base-$last" & pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
check_ok a $ra "$base"
check_ok b $rb "$base"
echo "two jobs at once: a took $(ports a), b took $(ports b)"
echo PASS
