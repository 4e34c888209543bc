#!/usr/bin/env bash
# `sparkrun doctor` on the build host. Without an RDMA device it must say so plainly, still
# check the rest (locked memory, libraries) and exit 2 (a FAIL row); with devices it must print a row per
# device. Usage: doctor_live.sh path/to/sparkrun
set -u
out=$("$1" doctor 2>&1); rc=$?
echo "$out"
if ! ls /sys/class/infiniband/* >/dev/null 2>&1; then
  [[ $rc -eq 2 ]] || { echo "doctor_live: expected exit 2 without RDMA devices, got $rc"; exit 1; }
  grep -q 'no RDMA device found' <<<"$out" || { echo "doctor_live: no plain no-device line"; exit 1; }
else
  grep -q 'link state' <<<"$out" || { echo "doctor_live: no device rows"; exit 1; }
fi
for row in 'locked memory' 'PMIx' 'hwloc' 'rdma-core'; do
  grep -q "$row" <<<"$out" || { echo "doctor_live: missing row $row"; exit 1; }
done
"$1" doctor --expect-mtu abc >/dev/null 2>&1; [[ $? -eq 3 ]] || { echo "doctor_live: bad option not refused with 3"; exit 1; }
echo "doctor_live: ok"
