#include "held_server.hpp"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace spark::launch {
namespace {

// The socket inode behind one of this process's fds, or 0.
unsigned long socket_inode(const std::string& link_path) {
  char target[64];
  const ssize_t n = ::readlink(link_path.c_str(), target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  unsigned long inode = 0;
  return std::sscanf(target, "socket:[%lu]", &inode) == 1 ? inode : 0;
}

// Sockets a thread of this process is blocked reading (from /proc/self/task/*/syscall: the
// call's number, then its arguments, the first being the fd).
std::vector<unsigned long> blocked_reads() {
  std::vector<unsigned long> inodes;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return inodes;
  while (const dirent* e = ::readdir(tasks)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/syscall");
    long nr = -1;
    std::string fd_hex;
    if (!(in >> nr >> fd_hex)) continue;  // "running", or gone
    bool reads = nr == SYS_read || nr == SYS_recvfrom;
#ifdef SYS_recvmsg
    reads = reads || nr == SYS_recvmsg;
#endif
    if (!reads) continue;
    const long fd = std::strtol(fd_hex.c_str(), nullptr, 16);
    if (const unsigned long inode = socket_inode("/proc/self/fd/" + std::to_string(fd)))
      inodes.push_back(inode);
  }
  ::closedir(tasks);
  return inodes;
}

struct TcpEnd {
  unsigned local_port = 0;
  unsigned remote_port = 0;
  unsigned long inode = 0;
};

// Loopback IPv4 connections of this network namespace (PMIx's server listens on lo only).
std::vector<TcpEnd> loopback_tcp() {
  std::vector<TcpEnd> ends;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    unsigned local_ip = 0, local_port = 0, remote_ip = 0, remote_port = 0, state = 0;
    unsigned long inode = 0;
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    if (std::sscanf(line.c_str(), " %*d: %8X:%4X %8X:%4X %2X %*X:%*X %*X:%*X %*X %*u %*u %lu",
                    &local_ip, &local_port, &remote_ip, &remote_port, &state, &inode) != 6)
      continue;
    // 127.0.0.0/8 in the kernel's byte order; state 01 is ESTABLISHED.
    if ((local_ip & 0xff) != 127 || state != 1) continue;
    ends.push_back({local_port, remote_port, inode});
  }
  return ends;
}

// The process that has the socket `inode` open, or 0 (gone, or not ours to see).
pid_t owner_of(unsigned long inode) {
  pid_t found = 0;
  DIR* procs = ::opendir("/proc");
  if (procs == nullptr) return 0;
  const std::string want = "socket:[" + std::to_string(inode) + "]";
  while (found == 0) {
    const dirent* p = ::readdir(procs);
    if (p == nullptr) break;
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    const std::string fds = std::string("/proc/") + p->d_name + "/fd";
    DIR* dir = ::opendir(fds.c_str());
    if (dir == nullptr) continue;
    while (const dirent* f = ::readdir(dir)) {
      if (f->d_name[0] == '.') continue;
      if (socket_inode(fds + "/" + f->d_name) == inode) {
        found = static_cast<pid_t>(std::atol(p->d_name));
        break;
      }
    }
    ::closedir(dir);
  }
  ::closedir(procs);
  return found;
}

std::string comm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm.empty() ? "?" : comm;
}

}  // namespace

std::optional<std::string> held_server_note(const std::vector<std::pair<int, pid_t>>& ranks,
                                            unsigned settle_ms) {
  std::vector<unsigned long> held = blocked_reads();
  if (held.empty()) return std::nullopt;
  // A live client's handshake is read in microseconds: only a read that lasts counts.
  ::usleep(settle_ms * 1000);
  const std::vector<unsigned long> again = blocked_reads();
  unsigned long inode = 0;
  for (unsigned long h : held)
    for (unsigned long a : again)
      if (h == a) inode = h;
  if (inode == 0) return std::nullopt;
  const std::vector<TcpEnd> tcp = loopback_tcp();
  const TcpEnd* ours = nullptr;
  for (const auto& e : tcp)
    if (e.inode == inode) ours = &e;
  if (ours == nullptr) return std::nullopt;  // not a loopback TCP connection: not PMIx's
  pid_t pid = 0;
  for (const auto& e : tcp)
    if (e.local_port == ours->remote_port && e.remote_port == ours->local_port)
      pid = owner_of(e.inode);
  std::ostringstream who;
  if (pid == 0) {
    who << "a local process (port " << ours->remote_port << ", not visible here)";
  } else {
    who << "pid " << pid << " (" << comm_of(pid) << ")";
    bool is_rank = false;
    for (const auto& [rank, rank_pid] : ranks) {
      if (rank_pid != pid) continue;
      who << ", rank " << rank << " of this job";
      is_rank = true;
    }
    if (!is_rank) who << ", not a rank of this job";
  }
  return "its PMIx server is held: it waits for a handshake from " + who.str() +
         ", connected to it and sending nothing; no rank gets an answer from it meanwhile";
}

}  // namespace spark::launch
