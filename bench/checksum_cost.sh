#!/usr/bin/env bash
# What a payload checksum would cost (docs/reliability.md, "Corruption and checksums"): builds
# bench/checksum_cost.c and prints one core's GB/s for CRC32C (the CPU's instruction, 1 and 3
# streams) and zlib's CRC32 against memcpy over the same 4 MiB buffer, and what each would
# take of a 200 Gb/s (25 GB/s) link. Writes bench/results/checksum_cost-VARIANT.json for
# bench/report. Never pass/fail.
#   bench/checksum_cost.sh [VARIANT]      (a few seconds)
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:-quiet}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=-msse4.2
[ "$(uname -m)" = aarch64 ] && flags=-march=armv8-a+crc
cc -O2 $flags -o "$tmp/checksum_cost" bench/checksum_cost.c -lz ||
  { echo "checksum_cost: build failed (needs zlib1g-dev)" >&2; exit 1; }
"$tmp/checksum_cost" >"$tmp/out"
python3 - "$tmp/out" "$variant" "bench/results/checksum_cost-$variant.json" "bench/checksum_cost.sh $*" <<'PY'
import csv, sys
sys.path.insert(0, "bench")
import results
out, variant, path, command = sys.argv[1:]
rows = list(csv.DictReader(open(out)))
copy = float(rows[0]["GBps"])
link = 25.0  # a Spark's 200 Gb/s port
rs = results.ResultSet("checksum_cost", variant, command=command,
                       note="one core, 4 MiB buffer, best of 3 x 200 rounds; ratio: the checksum's time "
                            "against memcpy's over the same bytes; a link of 200 Gb/s moves 25 GB/s")
print("| what | GB/s (one core) | time vs memcpy | cores to keep up with 25 GB/s (one end) |\n| --- | --- | --- | --- |")
for r in rows:
    g = float(r["GBps"])
    print(f"| {r['what']} | {g:.1f} | {copy / g:.2f}x | {link / g:.1f} |")
    if r["what"] != "memcpy":
        rs.row(f"{r['what']}, 4 MiB", "GB/s", g, None, peer_name="memcpy", peer=copy, ratio=copy / g,
               note=f"{link / g:.1f} cores to checksum 25 GB/s")
rs.write(path)
PY
