#!/usr/bin/env bash
# `sparkrun doctor -n N` on the build host (docs/doctor.md): the probe runs on every rank.
# Without an RDMA device it must say so plainly, still run the host checks, test every pair of
# ranks over tcp (rows marked tcp) and report reachability, and exit 2 (a FAIL row); with
# devices, every pair must have RDMA rows. A rank that never answers must give FAIL rows
# naming it within the probe timeout, never a hang. Bad options: exit 3, nothing started;
# a missing probe: 3. Usage: doctor_job.sh path/to/sparkrun
set -u
sr=$(realpath "$1")
fail() { echo "doctor_job: FAIL: $*"; exit 1; }
cd "$(mktemp -d)" || exit 1
trap 'rm -rf "$PWD"' EXIT
rdma=no
ls /sys/class/infiniband/* >/dev/null 2>&1 && rdma=yes

# 1. Two ranks.
out=$("$sr" doctor -n 2 --iters 4 2>&1); rc=$?
echo "$out"
grep -q '^HOST  *RANK  *CHECK  *LANE  *PEER  *RESULT  *LATENCY  *DETAIL' <<<"$out" || fail "no table header"
for row in 'locked memory' 'PMIx' 'hwloc' 'rdma-core'; do
  grep -q "$row" <<<"$out" || fail "missing host check row $row"
done
[[ $(grep -c ' lanes ' <<<"$out") -eq 2 ]] || fail "expected one lanes row per rank"
if [[ $rdma == no ]]; then
  [[ $rc -eq 2 ]] || fail "expected exit 2 without RDMA devices, got $rc"
  grep -q 'no RDMA device found' <<<"$out" || fail "no plain no-device line"
  grep -q 'no RDMA lane: round trips run over tcp' <<<"$out" || fail "no 'over tcp' lanes row"
  grep -Eq '^\S+ +0 +tcp round trip +tcp:\S+->\S+ +rank 1 \(\S+\) +ok +[0-9.]+ (us|ms) ' <<<"$out" ||
    fail "no ok tcp round trip row for rank 0 -> rank 1"
  grep -Eq '^\S+ +0 +reach +tcp:\S+ +rank 1 \(\S+\) +ok .*direct' <<<"$out" || fail "no direct reach row"
else
  grep -q 'rdma write' <<<"$out" || fail "RDMA devices present but no rdma write rows"
fi
grep -q 'sparkrun doctor: .*problem' <<<"$out" || grep -q 'all well' <<<"$out" || fail "no verdict line"

# 2. Three ranks, rank 2 never answers: FAIL rows naming it, exit 2, bounded.
t0=$(date +%s)
out=$("$sr" doctor -n 3 -x SPARK_DOCTOR_TEST_SILENT_RANK=2 --probe-timeout-ms 2000 --iters 4 2>&1); rc=$?
echo "$out"
[[ $rc -eq 2 ]] || fail "silent peer: exit $rc, expected 2"
[[ $(grep -Ec ' rank 2 \(\S+\) +FAIL .*no answer' <<<"$out") -ge 2 ]] || fail "silent peer: expected FAIL rows for 0-2 and 1-2"
grep -Eq '^\S+ +0 +(tcp round trip|rdma write) .* rank 1 \(\S+\) +ok ' <<<"$out" || fail "silent peer: the 0-1 pair must still pass"
grep -Eq ' reach .* rank 2 .* FAIL .*UNREACHABLE' <<<"$out" || fail "silent peer: no UNREACHABLE row"
(( $(date +%s) - t0 < 60 )) || fail "silent peer took $(( $(date +%s) - t0 )) s"

# 3. Rank 2 hangs (SIGSTOP) before the round trips: rank 0's table names it, a "job" FAIL row
#    says the fence timed out, the job ends (exit 2) in bounded time, and no rank is left.
t0=$(date +%s)
out=$("$sr" doctor -n 3 -x SPARK_DOCTOR_TEST_STOP_RANK=2 -x SPARKNET_ROCE_TIMEOUT_MS=2000 \
      --probe-timeout-ms 1000 --iters 4 2>&1); rc=$?
echo "$out"
[[ $rc -eq 2 ]] || fail "stopped rank: exit $rc, expected 2"
grep -Eq '^\S+ +0 +(tcp round trip|rdma write) .* rank 2 \(\S+\) +FAIL .*no answer' <<<"$out" ||
  fail "stopped rank: rank 0 has no FAIL row naming rank 2"
grep -Eq '^\S+ +0 +job .* FAIL .*fence timed out' <<<"$out" || fail "stopped rank: no job FAIL row"
(( $(date +%s) - t0 < 60 )) || fail "stopped rank took $(( $(date +%s) - t0 )) s"
sleep 1
pgrep -f "^$(dirname "$sr")/spark_doctor_probe" >/dev/null && fail "stopped rank: probe processes left"

# 4. Bad input: refused with 3 before anything starts; a missing probe: 3.
for bad in "-n 2 a.out" "-n abc" "-n 2 --probe-timeout-ms 0" "-n 2 --iters x" "--local -n 2" \
           "-n 2 --iters" "-n 2 --no-such-option" "--expect-mtu 12x" "--bandwidth" \
           "-n 2 --seconds 0" "-n 2 --link-gbps fast" "-n 2 --warn-below 30 --fail-below 40"; do
  # shellcheck disable=SC2086
  "$sr" doctor $bad >/dev/null 2>err; rc=$?
  [[ $rc -eq 3 ]] || fail "'doctor $bad' exit $rc, expected 3 ($(cat err))"
  grep -q 'sparkrun doctor' err || fail "'doctor $bad': message does not name sparkrun doctor"
done
SPARK_DOCTOR_PROBE=/nonexistent/probe "$sr" doctor -n 2 >/dev/null 2>err; rc=$?
[[ $rc -eq 3 ]] || fail "missing probe: exit $rc, expected 3"
grep -q 'SPARK_DOCTOR_PROBE' err || fail "missing probe: message does not name SPARK_DOCTOR_PROBE"
"$sr" doctor --help | grep -q -- '--probe-timeout-ms' || fail "--help does not document --probe-timeout-ms"
echo "doctor_job: ok"
