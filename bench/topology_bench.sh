#!/bin/sh
# Cost of sparkrun's binding decision (topology load + plan for 3 ranks), goal < 10 ms.
# Usage: bench/topology_bench.sh [BUILD_DIR]   (default build-topology; builds topology_bench)
# Rows: the live machine with and without NIC discovery, and the Spark XML fixture; each with
# hwloc's plugins loaded, and with HWLOC_PLUGINS_BLACKLIST as sparkrun sets it (its first
# hwloc_topology_init otherwise dlopens PCI/GL/OpenCL/libxml2 plugins: ~8 ms here).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-topology}
cmake --build "$build" --target topology_bench -j2 >/dev/null
bench=$build/bench/topology_bench
blacklist=hwloc_pci,hwloc_opencl,hwloc_gl,hwloc_xml_libxml,hwloc_cuda,hwloc_nvml,hwloc_rsmi,hwloc_levelzero
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in "" "--no-io" "--xml $root/tests/data/spark.xml"; do
  printf 'plugins loaded:      '; "$bench" $mode
  printf 'plugins blacklisted: '; HWLOC_PLUGINS_BLACKLIST=$blacklist "$bench" $mode
done
