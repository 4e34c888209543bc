# free_port [EXCLUDE...]: prints a TCP port that no socket on this host (or network namespace)
# uses, from 20000 up to the kernel's ephemeral range: a port inside that range may be any
# connection's local end at any moment, which no listener check sees (rdma.vm_pair and
# fault.settings_differ lost runs to "Address already in use" there while other tests ran
# beside them). Ports given as arguments count as taken (several picked in a row). Returns 1
# when none is found in 50 tries.
free_port() {
  local lo=20000 eph_lo hi p
  read -r eph_lo _ </proc/sys/net/ipv4/ip_local_port_range
  hi=$((eph_lo > lo + 1000 ? eph_lo : 40000))
  for _ in $(seq 50); do
    p=$((lo + RANDOM % (hi - lo)))
    [[ " $* " == *" $p "* ]] && continue
    ss -Htan "sport = :$p" | grep -q . && continue
    echo "$p"
    return 0
  done
  return 1
}
