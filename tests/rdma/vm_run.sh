#!/usr/bin/env bash
# Runs a test script inside a small qemu VM (software emulation, no KVM) that boots Debian's
# own kernel with Soft-RoCE (rdma_rxe), so that verbs code paths run for real on a host whose
# kernel has no RDMA. See docs/roce.md and tests/rdma/README.md.
#
#   vm_run.sh [--cache DIR] [--work DIR] [--timeout S] [--lanes N] [--mtu M] [--bin FILE]...
#             [--tree DIR]... [--nic listen:PORT[:NET]|connect:PORT[:NET]]... [--node N]
#             [--smp N] [--mem MB]
#             [--build-only | --initrd FILE] SCRIPT
#
# SCRIPT is a /bin/sh script run inside the VM as /test.sh with every --bin FILE in /bin.
# --tree DIR copies a whole folder to the same path inside, with the libraries of every shared
# object in it (e.g. Open MPI's MCA components and UCX's modules, which are dlopen'ed).
# Devices inside: dummy netdev dN (10.50.N.1/24, MTU --mtu, default 9000 as on a Spark) with
# rxe device rxeN, N = 0..lanes-1 (--lanes 0: none).
# --nic adds an e1000 NIC joined to another VM by a qemu socket on 127.0.0.1:PORT (one VM
# listens, the other connects; vm_mesh.sh does both). NIC K is ethK with 10.60.NET.NODE/24
# (NET defaults to K; vm_mesh.sh numbers subnets by link) and rxe device rxe(lanes+K); NODE is
# --node (default 1), also in /etc/spark_node.
# --build-only builds the initramfs (with e1000) and prints its path; --initrd boots a built
# one (two VMs of a pair share one initramfs: the node number comes from the kernel command line).
# --timeout S bounds the whole run (kernel fetch, initramfs, boot, script): the VM gets what
# is left after the preparation, so the verdict or the reason for its absence always comes
# before CTest's TIMEOUT (set 60 s above S), never a bare kill by CTest.
# Exit code: the script's exit code as printed by the VM's verdict marker; 3 when the VM
# printed no verdict (crash, timeout; the last case it started is named); 4 for a harness
# error (download, build).
set -euo pipefail

cache=${SPARK_VM_CACHE:-/var/cache/sparkrun/vm}
work=""
timeout_s=170
lanes=1
mtu=9000
bins=()
trees=()
nics=()
node=1
smp=2
mem=2048
build_only=0
initrd=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --lanes) lanes=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --bin) bins+=("$2"); shift 2 ;;
    --tree) trees+=("$2"); shift 2 ;;
    --nic) nics+=("$2"); shift 2 ;;
    --node) node=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --initrd) initrd=$2; shift 2 ;;
    -*) echo "vm_run: unknown option $1" >&2; exit 4 ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || { echo "vm_run: usage: vm_run.sh [options] SCRIPT" >&2; exit 4; }
script=$1
[[ -r "$script" ]] || { echo "vm_run: cannot read $script" >&2; exit 4; }
[[ "$lanes" =~ ^[0-4]$ ]] || { echo "vm_run: --lanes must be 0..4" >&2; exit 4; }
[[ "$node" =~ ^[1-9][0-9]?$ ]] || { echo "vm_run: --node must be 1..99" >&2; exit 4; }
[[ "$smp" =~ ^[1-4]$ && "$mem" =~ ^[0-9]+$ ]] || { echo "vm_run: bad --smp or --mem" >&2; exit 4; }
for n in "${nics[@]}"; do
  [[ "$n" =~ ^(listen|connect):[0-9]+(:[0-9]+)?$ ]] || { echo "vm_run: --nic $n: expected listen:PORT[:NET] or connect:PORT[:NET]" >&2; exit 4; }
done
[[ "$mtu" =~ ^[0-9]+$ ]] || { echo "vm_run: --mtu must be a number" >&2; exit 4; }

die() { echo "vm_run: $*" >&2; exit 4; }
for tool in qemu-system-x86_64 busybox cpio gzip depmod modprobe dpkg-deb apt-get apt-cache flock; do
  command -v "$tool" >/dev/null || die "$tool not found: run ./scripts/deps --test"
done
busybox_bin=$(command -v busybox)

# --- 1. the kernel: the real package behind linux-image-amd64, cached by version ----------
mkdir -p "$cache" 2>/dev/null || die "cannot create cache dir $cache (set SPARK_VM_CACHE)"
cache=$(cd "$cache" && pwd)
# Each apt-cache run parses every package list (no pkgcache.bin here: ~2 s of CPU, 5 s at
# load 17) and the answer only moves with the lists: it is kept per state of the lists.
lists_key=$({ stat -c '%n %s %Y' /var/lib/apt/lists/*Packages* /etc/apt/sources.list* \
  /etc/apt/preferences* 2>/dev/null || true; } | md5sum | cut -c1-16)
resolved="$cache/linux-image-amd64.$lists_key"
pkg="" pver=""
[[ -r "$resolved" ]] && read -r pkg pver <"$resolved"
if [[ -z "$pkg" || -z "$pver" ]]; then
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
  [[ -n "$pkg" ]] || die "cannot resolve linux-image-amd64 (apt-get update?)"
  pver=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2; exit}')
  [[ -n "$pver" ]] || die "no candidate version of $pkg (apt-get update?)"
  echo "$pkg $pver" >"$resolved.$$" && mv "$resolved.$$" "$resolved"
fi
kver=${pkg#linux-image-}
kdir="$cache/$pkg-$pver"
exec 9>"$cache/.lock"
flock 9  # parallel tests share one download/extract
if [[ ! -f "$kdir/.done" ]]; then
  rm -rf "$kdir" "$cache/dl"
  mkdir -p "$cache/dl"
  echo "vm_run: fetching $pkg $pver from the apt mirror (once per kernel version)" >&2
  (cd "$cache/dl" && apt-get download "$pkg" >/dev/null 2>"$cache/dl/apt.log") ||
    { cat "$cache/dl/apt.log" >&2; die "apt-get download $pkg failed"; }
  dpkg-deb -x "$cache"/dl/*.deb "$kdir.tmp" || die "dpkg-deb -x failed"
  rm -rf "$cache/dl"
  # The .deb ships no modules.dep.
  depmod -b "$kdir.tmp" "$kver" || die "depmod failed"
  mv "$kdir.tmp" "$kdir"
  touch "$kdir/.done"
fi
flock -u 9

# --- 2. the initramfs ----------------------------------------------------------------------
if [[ -z "$work" ]]; then work=$(mktemp -d /tmp/sparkvm.XXXXXX); trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$work" && work=$(cd "$work" && pwd)
root="$work/root"
with_e1000=0
if [[ ${#nics[@]} -gt 0 || $build_only -eq 1 ]]; then with_e1000=1; fi
if [[ -n "$initrd" ]]; then
  [[ -r "$initrd" ]] || die "cannot read --initrd $initrd"
else
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,run,lib/modules,usr/lib,etc/libibverbs.d}
for a in $("$busybox_bin" --list); do
  [[ -e "$root/bin/$a" ]] || ln -s busybox "$root/bin/$a"
done

# Modules in load order (rdma_rxe needs crc32 at run time but does not declare it).
modlist="$work/modules.txt"
: >"$modlist"
mods="crc32_generic rdma_rxe dummy"
# With NICs (VM meshes) also tc's filters, so a scenario can drop RoCE (UDP 4791) on a
# cable while tcp still crosses it: clsact (sch_ingress), u32 match, drop action (gact).
# And prio + tbf, to shape RoCE on a cable (doctor --bandwidth's slow-cable case); netem for
# the wire faults of vm_netem.sh (loss, delay, reorder, duplicates, corruption).
[[ $with_e1000 -eq 1 ]] && mods="$mods e1000 sch_ingress cls_u32 act_gact sch_prio sch_tbf sch_netem"
for m in $mods; do
  modprobe -d "$kdir" -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}' >>"$modlist" ||
    die "modprobe --show-depends $m failed"
done
awk '!seen[$0]++' "$modlist" >"$modlist.u"
: >"$root/modules.order"
while read -r path; do
  base=$(basename "$path")
  cp "$path" "$root/lib/modules/$base"
  echo "$base" >>"$root/modules.order"
done <"$modlist.u"

# Binaries and every library they load (plus the rxe verbs provider, dlopen'ed by libibverbs).
provider=$(ls /usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1)
[[ -n "$provider" ]] || die "rxe provider not found: apt-get install ibverbs-providers"
# put FILE DEST: copies without debug info. A RelWithDebInfo libspark.so is ~28 MB, ~2.3 MB
# stripped: the initramfs shrank from 36 MB to a few, which gzip here and the TCG kernel's
# unpacking at boot both paid for (tens of seconds per VM test under load).
strip_bin=$(command -v strip || true)
put() {
  cp -L "$1" "$2"
  if [[ -n "$strip_bin" ]]; then "$strip_bin" --strip-debug "$2" 2>/dev/null || true; fi
}
copy_with_libs() {  # $1 file, $2 destination path inside root
  local f=$1 dest=$2
  mkdir -p "$root/$(dirname "$dest")"
  rm -f "$root/$dest"
  put "$f" "$root/$dest"
  { ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | while read -r lib; do
    [[ -e "$root$lib" ]] && continue
    mkdir -p "$root$(dirname "$lib")"
    put "$lib" "$root$lib"
    # Libraries from the build tree (libspark.so) may live under /tmp, which the VM's init
    # covers with a tmpfs: also put them where ld.so always looks.
    case "$lib" in
      /lib/* | /usr/lib/* | /lib64/*) ;;
      *) mkdir -p "$root/lib/x86_64-linux-gnu" && put "$lib" "$root/lib/x86_64-linux-gnu/$(basename "$lib")" ;;
    esac
  done
}
copy_with_libs "$busybox_bin" /bin/busybox  # busybox-static: no libraries
copy_with_libs "$provider" "$provider"
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
# busybox-static runs its own applets before PATH: real iproute2 under /usr/sbin.
copy_with_libs "$(command -v ip)" /usr/sbin/ip
copy_with_libs "$(command -v rdma)" /usr/sbin/rdma
[[ $with_e1000 -eq 1 ]] && copy_with_libs "$(command -v tc)" /usr/sbin/tc
for b in ibv_devinfo ibv_rc_pingpong; do
  p=$(command -v "$b" || true)
  [[ -n "$p" ]] && copy_with_libs "$p" "/usr/bin/$b"
done
for b in "${bins[@]}"; do
  [[ -x "$b" ]] || die "test binary $b missing or not executable"
  copy_with_libs "$b" "/bin/$(basename "$b")"
done
for t in "${trees[@]}"; do
  [[ -d "$t" ]] || die "--tree $t is not a folder"
  t=$(cd "$t" && pwd -P)
  mkdir -p "$root$t"
  cp -a "$t/." "$root$t/"
  while read -r f; do
    case "$f" in *.so | *.so.*) copy_with_libs "$f" "$f" ;; esac
  done < <(find "$t" -type f ! -name '*.a' ! -name '*.la')
  find "$root$t" \( -name '*.a' -o -name '*.la' \) -delete
done
cp "$script" "$root/test.sh"
cp "$(dirname "$0")/vm_lib.sh" "$root/vm_lib.sh"  # what the in-VM scripts share
chmod +x "$root/test.sh"
# Shared libraries are found through the standard paths; give ld.so a cache-free hint.
echo "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" >"$root/etc/ld_library_path"

cat >"$root/init" <<INIT
#!/bin/sh
export PATH=/bin:/usr/sbin:/usr/bin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
ulimit -l unlimited
for m in \$(cat /modules.order); do
  insmod /lib/modules/\$m || echo "init: insmod \$m failed"
done
/usr/sbin/ip link set lo up
i=0
while [ \$i -lt $lanes ]; do
  /usr/sbin/ip link add d\$i type dummy
  /usr/sbin/ip link set d\$i mtu $mtu
  /usr/sbin/ip addr add 10.50.\$i.1/24 dev d\$i
  /usr/sbin/ip link set d\$i up
  /usr/sbin/rdma link add rxe\$i type rxe netdev d\$i
  i=\$((i+1))
done
node=\$(sed -n 's/.*spark_node=\([0-9]*\).*/\1/p' /proc/cmdline)
echo "\${node:-1}" >/etc/spark_node
nets=\$(sed -n 's/.*spark_nets=\([0-9,]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
k=0
for nic in /sys/class/net/eth*; do
  [ -e "\$nic" ] || break
  e=\${nic##*/}
  net=\$k
  j=0
  for n in \$nets; do [ \$j -eq \$k ] && net=\$n; j=\$((j+1)); done
  /usr/sbin/ip link set \$e mtu $mtu
  /usr/sbin/ip addr add 10.60.\$net.\${node:-1}/24 dev \$e
  /usr/sbin/ip link set \$e up
  /usr/sbin/rdma link add rxe\$((i+k)) type rxe netdev \$e
  k=\$((k+1))
done
echo "SPARK_VM_READY"
cd /tmp
/bin/sh /test.sh
rc=\$?
echo "SPARK_VM_VERDICT rc=\$rc"
sync
poweroff -f
INIT
chmod +x "$root/init"

(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.cpio.gz"
initrd="$work/initrd.cpio.gz"
rm -rf "$root"  # the cpio archive is all qemu needs
fi
if [[ $build_only -eq 1 ]]; then
  echo "$initrd"
  exit 0
fi
netargs=(-nic none)
nets=""
for k in "${!nics[@]}"; do
  spec=${nics[$k]}
  mode=${spec%%:*} port=${spec#*:}
  net=$k
  if [[ "$port" == *:* ]]; then net=${port#*:} port=${port%%:*}; fi
  nets+="${nets:+,}$net"
  netargs+=(-netdev "socket,id=n$k,$mode=127.0.0.1:$port"
    -device "e1000,netdev=n$k,mac=52:54:00:5a:$(printf %02x "$node"):$(printf %02x "$k")")
done

# --- 3. boot ------------------------------------------------------------------------------
log="$work/console.log"
prep_s=$SECONDS
vm_s=$((timeout_s - prep_s))
[[ $vm_s -ge 30 ]] || die "preparing the VM took ${prep_s}s of the ${timeout_s}s allowed (--timeout)"
echo "vm_run: booting $kver (tcg) after ${prep_s}s of preparation, ${vm_s}s left, console log $log" >&2
set +e
timeout -k 5 "$vm_s" qemu-system-x86_64 -accel tcg -m "$mem" -smp "$smp" -nographic \
  -no-reboot "${netargs[@]}" -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$initrd" \
  -append "console=ttyS0 quiet panic=-1 oops=panic no_timer_check spark_node=$node spark_nets=$nets" </dev/null 2>&1 |
  tee "$log" | tr -d '\r'
qrc=${PIPESTATUS[0]}
set -e
# A kernel message may land on the console just before the marker, on the same line.
verdict=$(tr -d '\r' <"$log" | sed -n 's/.*SPARK_VM_VERDICT rc=\([0-9]*\)$/\1/p' | tail -1)
if [[ -z "$verdict" ]]; then
  if [[ $qrc -eq 124 || $qrc -eq 137 ]]; then
    echo "vm_run: no verdict: the VM ran past its ${vm_s}s (${SECONDS}s in all, --timeout $timeout_s)" >&2
  else
    echo "vm_run: no verdict: qemu exited with $qrc after ${SECONDS}s" >&2
  fi
  # The in-VM scripts announce each case with "=== NAME: CMD" (vm_lib.sh run): the last one
  # is where it stopped.
  last=$(tr -d '\r' <"$log" | grep -a '^=== ' | tail -1 || true)
  echo "vm_run: last case line on the console: ${last:-none (the script never started a case)}" >&2
  exit 3
fi
echo "vm_run: verdict rc=$verdict" >&2
exit "$verdict"
