#!/usr/bin/env bash
# SPARK_LOG under sparkrun (docs/configuration.md): SPARKRUN HELLO.
#   info  : prefixed "HOST:PID [RANK] SUBSYSTEM: " lines for the bootstrap, the wire-up (one per
#           peer: transport and why), each transport's set-up, and the launcher's steps
#   warn  : (the default) none of them
#   trace : more (fences, endpoints)
#   a bad value or subsystem: exit 2 before anything starts, with the knob's message
set -u
sparkrun=$1 hello=$2
fail() { echo "FAIL: $*"; echo "--- output"; echo "$out"; exit 1; }
has() { grep -Eq -- "$1" <<<"$out" || fail "missing /$1/"; }
count() { grep -Ec -- "$1" <<<"$out"; }
line='^[^ :]+:[0-9]+ \[([0-9]+|\?|sparkrun|daemon)\] [a-z]+: '  # any logger line

out=$(SPARK_LOG=info SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 2 "$hello" 2>&1) || fail "info: rc $?"
for r in 0 1; do
  has "^[^ :]+:[0-9]+ \[$r\] bootstrap: (pmix|env): rank $r of 2 on node [^ ]+ \(node rank 0, local rank $r of 2\) in [0-9.]+ ms$"
  has "^[^ :]+:[0-9]+ \[$r\] wireup: rank $r -> rank $((1 - r)): tcp$"
  has "^[^ :]+:[0-9]+ \[$r\] tcp: connected to ranks $((1 - r)) in [0-9.]+ ms \(slots of [0-9]+ bytes\)$"
  has "^[^ :]+:[0-9]+ \[$r\] wireup: 1 peers connected over 1 transport\(s\) in [0-9.]+ ms$"
done
has "^[^ :]+:[0-9]+ \[sparkrun\] launch: ranks started$"
has "^[^ :]+:[0-9]+ \[sparkrun\] launch: rank 1 ended$"
has "^[^ :]+:[0-9]+ \[sparkrun\] launch: every rank ended$"
# The host of a rank's lines is the launcher's name for its node (SPARK_HOST).
host=$(sed -nE 's/^hello from rank 0 of 2 on ([^ ]+) .*/\1/p' <<<"$out")
[ -n "$host" ] || fail "no greeting"
has "^$host:[0-9]+ \[0\] bootstrap: "
info_lines=$(count "$line")

out=$(SPARK_LOG=info timeout 60 "$sparkrun" -n 2 "$hello" 2>&1) || fail "info shm: rc $?"
has "^[^ :]+:[0-9]+ \[0\] wireup: rank 0 -> rank 1: shm$"
has "^[^ :]+:[0-9]+ \[0\] shm: connected to ranks 1 in "

out=$(SPARK_LOG=info:wireup SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 2 "$hello" 2>&1) || fail "info:wireup: rc $?"
has "\[0\] wireup: rank 0 -> rank 1: tcp$"
[ "$(count "$line")" = "$(count '^[^ :]+:[0-9]+ \[[0-9]+\] wireup: ')" ] || fail "info:wireup printed other subsystems"

out=$(env -u SPARK_LOG SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 2 "$hello" 2>&1) || fail "default: rc $?"
[ "$(count "$line")" = 0 ] || fail "the default level (warn) printed info lines"
grep -q "allreduce of ranks 0..1: sum 1 (correct on every rank)" <<<"$out" || fail "no checked sum"

out=$(SPARK_LOG=trace SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -n 2 "$hello" 2>&1) || fail "trace: rc $?"
has "^[^ :]+:[0-9]+ \[0\] bootstrap: fence \(endpoints\) done in [0-9.]+ ms$"
has "^[^ :]+:[0-9]+ \[1\] tcp: set up for ranks 0: endpoint of [0-9]+ bytes published$"
[ "$(count "$line")" -gt "$info_lines" ] || fail "trace printed no more than info ($info_lines lines)"

# -v still reports the per-peer choice (SPARK_LOG=info:wireup for the ranks) and its timed steps.
out=$(SPARK_TRANSPORT=tcp timeout 60 "$sparkrun" -v -n 2 "$hello" 2>&1) || fail "-v: rc $?"
has "\[1\] wireup: rank 1 -> rank 0: tcp$"
has "^sparkrun: +[0-9.]+ ms ranks started$"

for bad in loud info:wirup; do
  out=$(SPARK_LOG=$bad timeout 60 "$sparkrun" -n 2 "$hello" 2>&1)
  rc=$?
  [ "$rc" = 2 ] || fail "SPARK_LOG=$bad: exit $rc, want 2"
  has "^sparkrun: error: SPARK_LOG=\"$bad\" is refused: unknown (level|subsystem \"wirup\" \(subsystems: [a-z|]+\)); valid: LEVEL\[:SUBSYSTEM,...\]"
  has "^sparkrun: no rank was started$"
  grep -q "hello from" <<<"$out" && fail "SPARK_LOG=$bad: a rank ran"
done
echo PASS
