#!/usr/bin/env bash
# Several qemu VMs (TCG) cabled like Sparks without a switch: every link is a pair of e1000
# NICs joined by a qemu socket on 127.0.0.1 (the lower node listens, the higher connects), with
# Soft-RoCE (rxe) on every NIC, so RoCE v2 crosses each virtual cable as UDP 4791. All VMs boot
# one shared initramfs and run the same SCRIPT. See docs/roce.md.
#
#   vm_mesh.sh [--cache DIR] [--work DIR] [--timeout S] [--mem MB] [--bin FILE]... [--tree DIR]...
#              --links A-B[,C-D...] SCRIPT
#
# Link L (0-based, in --links order) is subnet 10.60.L.0/24: node A is 10.60.L.A, node B is
# 10.60.L.B. Inside VM N (in /etc/spark_node) its NICs are eth0, eth1, ... in --links order,
# each with rxeK on ethK. A triangle is --links 1-2,1-3,2-3; a 4-ring 1-2,2-3,3-4,1-4.
# Exit 0 only when every VM prints verdict 0; otherwise the first non-zero verdict (3: none).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/free_port.sh"
cache=${SPARK_VM_CACHE:-/var/cache/sparkrun/vm}
work=""
timeout_s=300
mem=640
links=""
pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --bin) pass+=(--bin "$2"); shift 2 ;;
    --tree) pass+=(--tree "$2"); shift 2 ;;
    -*) echo "vm_mesh: unknown option $1" >&2; exit 4 ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || { echo "vm_mesh: usage: vm_mesh.sh [options] --links A-B,... SCRIPT" >&2; exit 4; }
[[ "$links" =~ ^[1-9]-[1-9](,[1-9]-[1-9])*$ ]] ||
  { echo "vm_mesh: --links must look like 1-2,1-3,2-3 (nodes 1..9)" >&2; exit 4; }
script=$1
IFS=, read -r -a pairs <<<"$links"
nodes=0
for p in "${pairs[@]}"; do
  a=${p%-*} b=${p#*-}
  [[ $a -lt $b ]] || { echo "vm_mesh: link $p: write the lower node first" >&2; exit 4; }
  ((b > nodes)) && nodes=$b
done
if [[ -z "$work" ]]; then work=$(mktemp -d /tmp/sparkmesh.XXXXXX); trap 'rm -rf "$work"' EXIT; fi
for n in $(seq "$nodes"); do mkdir -p "$work/$n"; done
work=$(cd "$work" && pwd)
t0=$(date +%s)

initrd=$("$here/vm_run.sh" --cache "$cache" --work "$work/1" --lanes 0 --build-only "${pass[@]}" "$script") ||
  exit 4

# A free loopback port per link (qemu's listen fails on a taken one; tests/lib/free_port.sh).
ports=()
for _ in "${pairs[@]}"; do
  p=$(free_port "${ports[@]}") || break
  ports+=("$p")
done
[[ ${#ports[@]} -eq ${#pairs[@]} ]] || { echo "vm_mesh: no free loopback port" >&2; exit 4; }

# Start nodes in order: each connects only to lower nodes, which already listen.
common=(--cache "$cache" --timeout "$timeout_s" --smp 1 --mem "$mem" --initrd "$initrd")
pids=()
for n in $(seq "$nodes"); do
  nics=() listens=()
  for l in "${!pairs[@]}"; do
    a=${pairs[$l]%-*} b=${pairs[$l]#*-}
    if [[ $a -eq $n ]]; then nics+=(--nic "listen:${ports[$l]}:$l"); listens+=("${ports[$l]}"); fi
    if [[ $b -eq $n ]]; then nics+=(--nic "connect:${ports[$l]}:$l"); fi
  done
  "$here/vm_run.sh" "${common[@]}" --work "$work/$n" --node "$n" "${nics[@]}" "$script" \
    > >(sed -u "s/^/vm$n| /") 2>&1 &
  pids+=($!)
  # qemu connects once: wait until this node's qemu listens on its ports.
  for _ in $(seq 300); do
    ok=1
    for p in "${listens[@]}"; do ss -Hltn "sport = :$p" | grep -q . || ok=0; done
    [[ $ok -eq 1 ]] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
done
rc=0
verdicts=""
for n in $(seq "$nodes"); do
  wait "${pids[$((n - 1))]}"
  v=$?
  verdicts+=" node $n: $v"
  [[ $rc -eq 0 && $v -ne 0 ]] && rc=$v
done
echo "vm_mesh: verdicts$verdicts ($(($(date +%s) - t0)) s in all)" >&2
exit "$rc"
