#!/usr/bin/env bash
# The same failure (rank 1 stops after 2 allreduces, SPARKNET_ROCE_TIMEOUT_MS=300,
# SPARK_ON_FAILURE=raise) seen through the C++ API and through the C API: the survivors'
# records agree field for field (all but the timing fields), each API's checks pass
# (failure() = thrown record, check_health() throws / fails, a later call fails at once with
# the same record).
#   api_records.sh SPARKRUN FAULT_STREAM
set -u
. "$(dirname "$0")/lib.sh"
sparkrun=$1 prog=$2
out=$(mktemp)
trap 'rm -f "$out" "$out".*' EXIT
for api in cpp c; do
  SPARK_TRANSPORT=tcp SPARK_TCP_LANES=1 SPARKNET_ROCE_TIMEOUT_MS=300 SPARK_ON_FAILURE=raise timeout 60 \
    "$sparkrun" -n 3 --kill-grace 2 "$prog" api $api 1 >"$out" 2>&1
  rc=$?
  echo "--- $api: exit $rc"; cat "$out"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "$api: exit $rc"
  grep -q "FAIL:" "$out" && exit 1
  for r in 0 2; do
    line=$(grep -E "RECORD rank=$r " "$out" | sed -E 's/^.*(RECORD .*) later_call_ms=([0-9]+) .*/\1 \2/') ||
      fail "$api: no record from rank $r"
    later=${line##* }
    [ "$later" -le 200 ] || fail "$api: rank $r: a call after the failure took $later ms (must fail at once)"
    echo "${line% *}" >>"$out.$api"
  done
done
cat "$out.cpp"
diff "$out.cpp" "$out.c" || fail "the C and C++ records differ"
grep -q "peer=1 seq=5 " "$out.cpp" || fail "the records do not name the stopped rank 1 at seq 5"
echo PASS
