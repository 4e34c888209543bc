#!/usr/bin/env bash
# The soak of wire and process faults (docs/reliability.md, "Soak of wire faults"): JOBS jobs on
# 3 network-namespace hosts (needs root and iptables), each with one random fault (loss 1/5/20 %,
# a data-plane or control-plane partition of one host, a partition healed after 1 s, a rank
# SIGKILLed or SIGSTOPped, a node daemon SIGKILLed); outcomes per fault, "else" must be 0 and
# nothing may be left behind. Writes bench/results/wire_soak-VARIANT.json for bench/report.
#   bench/wire_soak.sh [BUILD_DIR] [JOBS] [SEED] [VARIANT]
set -u
cd "$(dirname "$0")/.."
build=${1:-build} jobs=${2:-200} seed=${3:-1} variant=${4:-quiet}
exec tests/multihost/netns_fixture.sh "$PWD/tests/multihost/wire_soak.sh" "$build/launcher/sparkrun" \
  "$build/tests/fault/fault_stream" "$jobs" "$seed" "$PWD/bench/results/wire_soak-$variant.json" "$variant"
