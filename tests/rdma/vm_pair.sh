#!/usr/bin/env bash
# Two qemu VMs (TCG) joined by qemu socket links, one e1000 NIC per link in each VM, Soft-RoCE
# (rxe) on every NIC: RoCE v2 really crosses a wire (UDP 4791 between the VMs) instead of rxe's
# loopback. Both VMs boot one shared initramfs and run the same SCRIPT; node 1 listens, node 2
# connects (127.0.0.1 only). See docs/roce.md.
#
#   vm_pair.sh [--cache DIR] [--work DIR] [--timeout S] [--links N] [--bin FILE]... SCRIPT
#
# Inside VM NODE (1 or 2, in /etc/spark_node): ethK = 10.60.K.NODE/24 with rxeK, K < links.
# Exit 0 only when both VMs print verdict 0; otherwise the first non-zero verdict (3: none).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${SPARK_VM_CACHE:-/var/cache/sparkrun/vm}
work=""
timeout_s=300
links=2
pass=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --links) links=$2; shift 2 ;;
    --bin) pass+=(--bin "$2"); shift 2 ;;
    -*) echo "vm_pair: unknown option $1" >&2; exit 4 ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || { echo "vm_pair: usage: vm_pair.sh [options] SCRIPT" >&2; exit 4; }
[[ "$links" =~ ^[1-4]$ ]] || { echo "vm_pair: --links must be 1..4" >&2; exit 4; }
script=$1
if [[ -z "$work" ]]; then work=$(mktemp -d /tmp/sparkpair.XXXXXX); trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work/1" "$work/2" && work=$(cd "$work" && pwd)
t0=$(date +%s)

initrd=$("$here/vm_run.sh" --cache "$cache" --work "$work/1" --lanes 0 --build-only "${pass[@]}" "$script") ||
  exit 4

# Free loopback ports for the links (qemu's listen fails on a taken one: pick again).
ports=()
for _ in $(seq "$links"); do
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 20000))
    if ! ss -Hltn "sport = :$p" | grep -q . && [[ " ${ports[*]} " != *" $p "* ]]; then
      ports+=("$p")
      break
    fi
  done
done
[[ ${#ports[@]} -eq $links ]] || { echo "vm_pair: no free loopback port" >&2; exit 4; }
nic1=() nic2=()
for p in "${ports[@]}"; do
  nic1+=(--nic "listen:$p")
  nic2+=(--nic "connect:$p")
done

# One vCPU each: two VMs share the host's cores.
common=(--cache "$cache" --timeout "$timeout_s" --smp 1 --mem 1024 --initrd "$initrd")
"$here/vm_run.sh" "${common[@]}" --work "$work/1" --node 1 "${nic1[@]}" "$script" \
  > >(sed -u 's/^/vm1| /') 2>&1 &
pid1=$!
# qemu connects once: wait until node 1's qemu listens on every port.
for _ in $(seq 300); do
  ok=1
  for p in "${ports[@]}"; do ss -Hltn "sport = :$p" | grep -q . || ok=0; done
  [[ $ok -eq 1 ]] && break
  kill -0 "$pid1" 2>/dev/null || break
  sleep 0.1
done
"$here/vm_run.sh" "${common[@]}" --work "$work/2" --node 2 "${nic2[@]}" "$script" \
  > >(sed -u 's/^/vm2| /') 2>&1 &
pid2=$!
wait "$pid2"
rc2=$?
wait "$pid1"
rc1=$?
echo "vm_pair: node 1 verdict $rc1, node 2 verdict $rc2 ($(($(date +%s) - t0)) s in all)" >&2
[[ $rc1 -ne 0 ]] && exit "$rc1"
exit "$rc2"
