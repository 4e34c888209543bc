# free_port [EXCLUDE...]: prints a TCP port that no socket on this host (or network namespace)
# uses, from 20000 up to the kernel's ephemeral range: a port inside that range may be any
# connection's local end at any moment, which no listener check sees (rdma.vm_pair and
# fault.settings_differ lost runs to "Address already in use" there while other tests ran
# beside them). Ports given as arguments count as taken (several picked in a row). Returns 1
# when none is found in 50 tries.
free_port() {
  local lo=20000 eph_lo eph_hi hi p
  read -r eph_lo eph_hi </proc/sys/net/ipv4/ip_local_port_range
  hi=$eph_lo
  # An ephemeral range that starts low: the ports above it instead.
  ((eph_lo > lo + 1000)) || { lo=$((eph_hi + 1)) hi=65536; }
  ((hi - lo > 100)) || return 1
  for _ in $(seq 50); do
    p=$((lo + (RANDOM << 15 | RANDOM) % (hi - lo)))
    [[ " $* " == *" $p "* ]] && continue
    ss -Htan "sport = :$p" | grep -q . && continue
    echo "$p"
    return 0
  done
  return 1
}
