#include "transport/shm/shm_transport.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <random>
#include <utility>

#include "log/log.hpp"
#include "spark/error.hpp"
#include "spark/protocol/shm_segment.hpp"
#include "transport/shm/heavy_fence.hpp"
#include "transport/shm/ptracer.hpp"

namespace spark::transport {

namespace {

constexpr std::size_t kLine = 64;

// Control words of one mailbox, each on its own cache line (sender and receiver write
// different words; false sharing would cost every message a line bounce).
struct alignas(kLine) Control {
  alignas(kLine) std::atomic<std::uint32_t> head{0};        // published messages (sender)
  alignas(kLine) std::atomic<std::uint32_t> tail{0};        // released messages (receiver)
  alignas(kLine) std::atomic<std::uint32_t> rx_waiting{0};  // receiver sleeps on head
  std::atomic<std::uint32_t> tx_waiting{0};                 // sender sleeps on tail
  // When the sender woke the sleeping receiver (steady clock, ns; 0: not since the receiver
  // last looked): the receiver's measure of a real wake-up (ShmTransport::take_wake_latency).
  std::atomic<std::int64_t> woken_at_ns{0};
  // 1: the segment's owner registered for membarrier (heavy_fence.hpp), written before its
  // endpoint is published and never again; the pair's light path needs both ends' 1.
  std::atomic<std::uint32_t> owner_membarrier{0};
  // 1: the sender failed and left (Transport::leave); written once, by the sender only.
  std::atomic<std::uint32_t> left{0};
};
static_assert(sizeof(Control) == 3 * kLine);  // `left` shares the third line
static_assert(std::atomic<std::int64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::size_t slot_stride(std::size_t slot_bytes) {
  return kLine + slot_bytes;
}

std::int64_t steady_ns() noexcept {  // CLOCK_MONOTONIC: one clock for the node's processes
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

long futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val, const timespec* ts) {
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), op, val, ts, nullptr, 0);
}

// Cache hints for small messages, which cost cross-core line transfers rather than bytes
// (docs/collectives.md, "shm"). Both are hints: they move lines between caches and change no
// value and no ordering (a line demoted or prefetched is still coherent; the stamp's release
// store and the receiver's acquire load order the payload as before).
//  - demote: CLDEMOTE pushes a line the sender just wrote from its core's caches to the shared
//    last-level cache, so the receiver's read (the stamp it polls, then the payload) is served
//    there instead of by a snoop into the sender's core. Encoded in the hint-NOP space
//    (0F 1C /0): a no-op on x86 CPUs without it; other architectures have no such hint.
//  - prefetch for write: the sender asks for ownership of the next slot's lines while it waits
//    for its peer, so the next message's stores hit owned lines instead of waiting for the
//    receiver's copies to be invalidated one store after another (the receiver released that
//    slot: the sender holds its credit).
// Measured with 2 threads on this VM (1 KiB exchange + fold, p10 of 500-iteration batches):
// 0.75-0.95 us -> 0.58-0.76 us; 512 B 0.54 -> 0.41 us; 2 KiB 1.45 -> 1.01 us; at 4 KiB and
// 16 KiB both hints cost more than they saved (2.5 -> 2.8 us, 7.4 -> 9.2 us), hence the bound.
constexpr std::size_t kHintMaxBytes = 2048;

inline void demote_line(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  // "memory": not moved above the stores it is meant to follow (the stamp's release store).
  asm volatile("cldemote %0" ::"m"(*static_cast<const char*>(p)) : "memory");
#else
  (void)p;
#endif
}

// One side of a Dekker pair: store `counter` (head or tail: a release, it hands the slot over),
// then read whether the peer sleeps on it. Without light fences both accesses are seq_cst (on
// x86 a locked store that drains the store buffer). With them the peer, before it sleeps, runs
// a membarrier that fences this CPU too, so only the compiler must keep the two in order.
bool store_then_check(std::atomic<std::uint32_t>& counter, std::uint32_t value,
                      std::atomic<std::uint32_t>& peer_waiting, bool light) noexcept {
  if (light) {
    counter.store(value, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return peer_waiting.load(std::memory_order_relaxed) != 0;
  }
  counter.store(value, std::memory_order_seq_cst);
  return peer_waiting.load(std::memory_order_seq_cst) != 0;
}

// With light fences a sleeper first sleeps this long without the membarrier (it costs ~20 us
// in a VM, where it interrupts the peer's vCPU): the sender's unfenced store of head can be
// missed only if it is still in its store buffer when the kernel's futex compare reads head,
// a system call later, so a wake-up is practically never lost, and if it is, the wait is late
// by this much at most. A wait longer than this then fences for sure and sleeps on; so does
// every later slice of a wait that already slept a whole slice (`fence_first`: a late peer's
// 2 s wait then costs one wake-up per slice, not two).
constexpr std::chrono::microseconds kUnfencedSleep{200};

// Sleeps on `counter` while it holds `seen` (`waiting` set around the sleep; the peer that
// changes `counter` wakes it), at most `max`; returns true when the sleep lasted until `max`.
bool sleep_on(std::atomic<std::uint32_t>& counter, std::uint32_t seen,
              std::atomic<std::uint32_t>& waiting, bool light, bool fence_first,
              std::chrono::microseconds max) {
  auto futex_wait = [&](std::chrono::microseconds d) {
    timespec ts{static_cast<time_t>(d.count() / 1000000),
                static_cast<long>((d.count() % 1000000) * 1000)};
    return !(futex(&counter, FUTEX_WAIT, seen, &ts) < 0 && errno == ETIMEDOUT);
  };
  bool slept_through = false;
  waiting.store(1, std::memory_order_seq_cst);
  if (counter.load(std::memory_order_seq_cst) == seen) {
    bool woken = false;
    // A slice no longer than the unfenced sleep bounds a missed wake-up as well: no fence.
    if (light && max > kUnfencedSleep) {
      if (!fence_first) {
        woken = futex_wait(kUnfencedSleep);
        max -= kUnfencedSleep;
      }
      // Should the membarrier fail after all (it passed a trial at registration), short
      // sleeps keep a missed wake-up bounded.
      if (!woken && !heavy_fence()) max = std::min(max, kUnfencedSleep);
    }
    if (!woken && counter.load(std::memory_order_seq_cst) == seen) slept_through = !futex_wait(max);
  }
  waiting.store(0, std::memory_order_relaxed);
  return slept_through;
}

std::string pid_namespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return "?";
  return std::to_string(st.st_ino);
}

[[noreturn]] void fail_errno(const std::string& what) {
  throw Error("shm transport: " + what + ": " + std::strerror(errno) +
              " (check that /dev/shm is mounted and has space, or set SPARK_TRANSPORT=tcp)");
}

}  // namespace

// The first line of a slot: the header and the slot's stamp, the number of the message it
// holds (1, 2, ...; slots are reused, stamps never repeat within 2^32 messages). The receiver
// polls the stamp of the slot it expects next instead of `head`: the line it has to fetch
// anyway, so a message costs one line transfer less on the critical path (head is still
// written, for the receiver that sleeps on it).
struct SlotLine {
  MsgHeader header;
  std::byte pad[kLine - sizeof(MsgHeader) - sizeof(std::uint32_t)];
  std::atomic<std::uint32_t> stamp;
};
static_assert(sizeof(SlotLine) == kLine);

struct ShmTransport::Region {
  Control ctl;
  // followed by slots: [SlotLine][payload slot_bytes] ...
  std::byte* slot(std::size_t i, std::size_t slot_bytes) noexcept {
    return reinterpret_cast<std::byte*>(this + 1) + i * slot_stride(slot_bytes);
  }
  SlotLine& line(std::size_t i, std::size_t slot_bytes) noexcept {
    return *reinterpret_cast<SlotLine*>(slot(i, slot_bytes));
  }
};

ShmTransport::ShmTransport(int rank, int size, std::vector<int> node_ranks,
                           const std::string& job_id, const std::string& node_id,
                           ShmOptions options)
    : rank_(rank), node_ranks_(std::move(node_ranks)), opt_(options) {
  region_bytes_ = sizeof(Region) + opt_.slots * slot_stride(opt_.slot_bytes);
  // Whole pages: a peer maps its one region at its offset (64 KiB pages on some arm64 kernels).
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  region_bytes_ = (region_bytes_ + page - 1) / page * page;
  peers_.resize(static_cast<std::size_t>(size));
  std::random_device rd;
  name_ = protocol::shm_segment::name(job_id, node_id, rank, ::getpid(), rd());
  probe_[0] = (std::uint64_t{rd()} << 32 | rd()) | 1;  // the cookie; never 0
  int fd = ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail_errno("shm_open(" + name_ + ")");
  own_.bytes = region_bytes_ * node_ranks_.size();
  if (::ftruncate(fd, static_cast<off_t>(own_.bytes)) != 0) {
    int e = errno;
    ::close(fd);
    ::shm_unlink(name_.c_str());
    errno = e;
    fail_errno("ftruncate(" + name_ + ")");
  }
  // Not MAP_POPULATE: the segment holds a mailbox per local rank (N x ~2 MiB), and touching
  // all of it made start-up grow with the square of the ranks (16 ranks: 1.6 s of page faults
  // per rank on a 2-core VM; docs/performance-notes.md). A page is paid when a peer first
  // writes a message into it: only slots that carry data, and once.
  own_.base = ::mmap(nullptr, own_.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  ::close(fd);
  if (own_.base == MAP_FAILED) {
    own_.base = nullptr;
    ::shm_unlink(name_.c_str());
    errno = e;
    fail_errno("mmap(" + name_ + ")");
  }
  membarrier_ = opt_.membarrier && register_light_fences();
  for (std::size_t i = 0; i < node_ranks_.size(); ++i) {
    Region* r = new (region(own_.base, static_cast<int>(i))) Region{};
    r->ctl.owner_membarrier.store(membarrier_ ? 1 : 0, std::memory_order_relaxed);
  }
}

ShmTransport::~ShmTransport() {
  for (auto& p : peers_) {
    if (!p) continue;
    if (p->map.base != nullptr) ::munmap(p->map.base, p->map.bytes);
    if (p->pidfd >= 0) ::close(p->pidfd);
  }
  if (own_.base != nullptr) ::munmap(own_.base, own_.bytes);
  unlink();
}

ShmTransport::Region* ShmTransport::region(void* base, int index) const noexcept {
  return reinterpret_cast<Region*>(static_cast<std::byte*>(base) +
                                   static_cast<std::size_t>(index) * region_bytes_);
}

int ShmTransport::index_of(int rank) const {
  for (std::size_t i = 0; i < node_ranks_.size(); ++i)
    if (node_ranks_[i] == rank) return static_cast<int>(i);
  throw Error("shm transport: rank " + std::to_string(rank) + " is not on this node");
}

ShmTransport::Peer& ShmTransport::peer(int rank) {
  return *peers_[static_cast<std::size_t>(rank)];
}

std::string ShmTransport::endpoint() const {
  return ShmEndpoint{name_, ::getpid(), pid_namespace(),
                     reinterpret_cast<std::uintptr_t>(&probe_[0]), probe_[0]}
      .text();
}

namespace {

// One process_vm_readv/writev until done; 0 or the errno.
int cross_copy(int pid, void* local, std::uint64_t remote, std::size_t bytes, bool write) {
  auto* l = static_cast<std::byte*>(local);
  while (bytes > 0) {
    iovec li{l, bytes};
    iovec ri{reinterpret_cast<void*>(static_cast<std::uintptr_t>(remote)), bytes};
    const ssize_t n = write ? ::process_vm_writev(pid, &li, 1, &ri, 1, 0)
                            : ::process_vm_readv(pid, &li, 1, &ri, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    l += n;
    remote += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

void ShmTransport::attach(int peer_rank, const std::string& endpoint) {
  const ShmEndpoint ep = ShmEndpoint::parse(endpoint, peer_rank);
  auto p = std::make_unique<Peer>();
  int fd = ::shm_open(ep.segment.c_str(), O_RDWR, 0);
  if (fd < 0) fail_errno("shm_open(" + ep.segment + ") of rank " + std::to_string(peer_rank));
  // Only the mailbox this rank writes (its region in the peer's segment), and unpopulated:
  // mapping whole segments cost every rank N x N regions' page tables.
  p->map.bytes = region_bytes_;
  p->map.base = ::mmap(nullptr, p->map.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(region_bytes_) * index_of(rank_));
  int e = errno;
  ::close(fd);
  if (p->map.base == MAP_FAILED) {
    p->map.base = nullptr;
    errno = e;
    fail_errno("mmap(" + ep.segment + ")");
  }
  p->rx = region(own_.base, index_of(peer_rank));
  p->tx = region(p->map.base, 0);
  // Both ends read the same two flags, so they agree on which side fences.
  p->light = membarrier_ && p->tx->ctl.owner_membarrier.load(std::memory_order_relaxed) != 0;
  // A dead peer is noticed through a pidfd (readable once the process has exited), but only
  // when both share a pid namespace; otherwise the timeout catches it.
  const bool same_ns = ep.pid_namespace != "?" && ep.pid_namespace == pid_namespace();
  if (same_ns) p->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ep.pid, 0));
  p->pid = ep.pid;
  std::string why;
  if (!same_ns)
    why = "another pid namespace";
  else if (!opt_.cross_memory)
    why = "SPARK_SHM_CMA=off";
  else if (p->pidfd < 0)
    why = std::string("pidfd_open: ") + std::strerror(errno);
  else
    p->cma = probe_cross_memory(*p, ep, why);
  if (!p->cma && log::enabled(log::Level::info, "shm"))
    log::line("shm", "rank " + std::to_string(rank_) + " -> rank " + std::to_string(peer_rank) +
                         ": no cross-memory attach (" + why +
                         "): allreduce and reduce_scatter take the two-phase path");
  peers_[static_cast<std::size_t>(peer_rank)] = std::move(p);
}

// Cross-memory attach (single-copy collectives) needs the same pid namespace and ptrace rights
// over the peer (same user; Yama's ptrace_scope and seccomp may forbid it): read the peer's
// probe word and write it back. Without it, everything goes through the slots. The word must
// hold the peer's random cookie: an emulator (qemu-user) or a kernel that maps addresses
// differently would otherwise pass the test and copy the wrong bytes, and so would another
// process that got the pid of a peer that died before the pidfd was opened. The pidfd, opened
// before the read, is checked after it: the process that held the cookie is the pidfd's.
bool ShmTransport::probe_cross_memory(Peer& p, const ShmEndpoint& ep, std::string& why) {
  std::uint64_t word[8];
  if (const int err = cross_copy(ep.pid, word, ep.probe, sizeof word, false); err != 0) {
    why = std::string("process_vm_readv: ") + std::strerror(err);
    return false;
  }
  if (word[0] != ep.cookie) {
    why = "the probe word does not hold the peer's cookie";
    return false;
  }
  if (exited(p)) {
    why = "the peer exited";
    return false;
  }
  if (const int err = cross_copy(ep.pid, word, ep.probe, sizeof word, true); err != 0) {
    why = std::string("process_vm_writev: ") + std::strerror(err);
    return false;
  }
  return true;
}

std::unique_ptr<Transport> make_shm(const Setup& s) {
  std::vector<int> node_ranks = s.peers;
  node_ranks.push_back(s.rank);
  std::sort(node_ranks.begin(), node_ranks.end());
  const CommOptions& o = *s.options;
  // Before the endpoint is published: peers test cross-memory attach once they have it.
  declare_ptracer_for_siblings(s.rank, o.shm_cma, o.shm_ptracer);
  return std::make_unique<ShmTransport>(
      s.rank, s.size, node_ranks, o.job_id.empty() ? "job" : o.job_id,
      s.nodes[static_cast<std::size_t>(s.rank)],
      ShmOptions{o.slots, o.shm_slot_bytes, o.shm_cma, o.shm_membarrier});
}

void ShmTransport::connect(const Setup& s, const std::vector<std::string>& endpoints) {
  for (int r : s.peers) attach(r, endpoints[static_cast<std::size_t>(r)]);
}

void ShmTransport::unlink() noexcept {
  if (!unlinked_ && !name_.empty()) {
    ::shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

std::string ShmTransport::lane_name(int, WaitKind) const {
  return "shm";
}

bool ShmTransport::can_send(int peer_rank) {
  Peer& p = peer(peer_rank);
  // Reads the receiver's tail only when the credits seen last are used up: the line then
  // stays in the receiver's cache, and neither side pays a transfer of it per message.
  if (p.sent - p.tail_seen < opt_.slots) return true;
  p.tail_seen = p.tx->ctl.tail.load(std::memory_order_acquire);
  return p.sent - p.tail_seen < opt_.slots;
}

void ShmTransport::send(int peer_rank, const MsgHeader& header, const void* data) {
  Peer& p = peer(peer_rank);
  const std::size_t i = p.tx_slot;
  std::byte* slot = p.tx->slot(i, opt_.slot_bytes);
  if (header.bytes > 0) std::memcpy(slot + kLine, data, header.bytes);
  SlotLine& line = p.tx->line(i, opt_.slot_bytes);
  line.header = header;
  ++p.sent;
  p.tx_slot = i + 1 == opt_.slots ? 0 : i + 1;
  line.stamp.store(p.sent, std::memory_order_release);  // publishes header and payload
  // Store head, load rx_waiting: the sender's half of the Dekker pair with the receiver's
  // rx_waiting store + head load, so a receiver about to sleep either sees the new head or
  // gets woken. With light fences the receiver's membarrier orders both halves.
  if (store_then_check(p.tx->ctl.head, p.sent, p.tx->ctl.rx_waiting, p.light)) {
    // A clock read only on this path, which makes a system call anyway.
    p.tx->ctl.woken_at_ns.store(steady_ns(), std::memory_order_release);
    futex(&p.tx->ctl.head, FUTEX_WAKE, 1, nullptr);
  }
  if (header.bytes <= kHintMaxBytes) {
    // After the seq_cst store above the lines are written (the store buffer is drained), so
    // the demote moves the final bytes (with light fences the store is a plain release and
    // the demote a hint on lines that may still be on their way). Then, while this rank goes on to
    // wait for its peer, ownership of the next slot's lines (about the same size: collectives
    // repeat).
    const std::size_t span = kLine + header.bytes;
    for (std::size_t off = 0; off < span; off += kLine) demote_line(slot + off);
    if (p.sent - p.tail_seen < opt_.slots) {
      const std::byte* next = p.tx->slot(p.tx_slot, opt_.slot_bytes);
      for (std::size_t off = 0; off < span; off += kLine) __builtin_prefetch(next + off, 1);
    }
  }
}

RecvView ShmTransport::peek(int peer_rank) {
  Peer& p = peer(peer_rank);
  const std::size_t i = p.rx_slot;
  SlotLine& line = p.rx->line(i, opt_.slot_bytes);
  if (line.stamp.load(std::memory_order_acquire) != p.received + 1) return {};
  return {&line.header, p.rx->slot(i, opt_.slot_bytes) + kLine};
}

void ShmTransport::release(int peer_rank) {
  Peer& p = peer(peer_rank);
  ++p.received;
  p.rx_slot = p.rx_slot + 1 == opt_.slots ? 0 : p.rx_slot + 1;
  if (store_then_check(p.rx->ctl.tail, p.received, p.rx->ctl.tx_waiting, p.light))
    futex(&p.rx->ctl.tail, FUTEX_WAKE, 1, nullptr);
}

std::optional<std::chrono::nanoseconds> ShmTransport::take_wake_latency() noexcept {
  return std::exchange(wake_latency_, std::nullopt);
}

void ShmTransport::block(int peer_rank, WaitKind kind, std::chrono::microseconds max) {
  Peer& p = peer(peer_rank);
  // The data or credit may have come since the wait point last looked: then no fence (with
  // light fences a membarrier, ~20 us in a VM) and no sleep.
  if (kind == WaitKind::data) {
    if (p.rx->ctl.head.load(std::memory_order_acquire) != p.received) return;
    p.rx->ctl.woken_at_ns.store(0, std::memory_order_relaxed);  // a stamp from before: stale
    const bool again = p.slept_through_data == p.received;
    p.slept_through_data =
        sleep_on(p.rx->ctl.head, p.received, p.rx->ctl.rx_waiting, p.light, again, max)
            ? std::optional(p.received)
            : std::nullopt;
    const std::int64_t woken = p.rx->ctl.woken_at_ns.exchange(0, std::memory_order_acquire);
    const std::int64_t late = woken != 0 ? steady_ns() - woken : -1;
    if (late >= 0 && late < 1'000'000'000) wake_latency_ = std::chrono::nanoseconds(late);
  } else if (kind == WaitKind::credit) {
    if (p.sent - p.tx->ctl.tail.load(std::memory_order_acquire) < opt_.slots) return;
    // The receiver's tail is the sender's count less the slots in use: all of them here.
    const bool again = p.slept_through_credit == p.sent;
    p.slept_through_credit =
        sleep_on(p.tx->ctl.tail, p.sent - static_cast<std::uint32_t>(opt_.slots),
                 p.tx->ctl.tx_waiting, p.light, again, max)
            ? std::optional(p.sent)
            : std::nullopt;
  }
}

bool ShmTransport::light_fences(int peer_rank) const noexcept {
  const auto& p = peers_[static_cast<std::size_t>(peer_rank)];
  return p && p->light;
}

bool ShmTransport::can_access_peer(int peer_rank) const noexcept {
  const auto& p = peers_[static_cast<std::size_t>(peer_rank)];
  return p && p->cma;
}

// The copy goes to a pid, and a pid is reused once its process has exited and been reaped: a
// write to the pid of a dead peer could land in another process of the same user. The pidfd
// names the peer's process itself, so: before a write, the peer must not have exited (the pid
// can only name another process after the peer exited, was reaped and the kernel's pid counter
// went once round pid_max; that between this check and the syscall is not a real risk); after
// a read, it must not have exited either, else the bytes may be another process's and are
// not used. A zombie peer (exited, not reaped) refuses both with ESRCH by itself.
int ShmTransport::access_peer(int peer_rank, void* local, std::uint64_t remote, std::size_t bytes,
                              bool write) {
  Peer& p = peer(peer_rank);
  if (write && exited(p)) return ESRCH;
  const int err = cross_copy(p.pid, local, remote, bytes, write);
  if (err == 0 && !write && exited(p)) return ESRCH;
  return err;
}

bool ShmTransport::exited(Peer& p) {
  if (!p.gone && p.pidfd >= 0) {
    pollfd pfd{p.pidfd, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0) p.gone = true;
  }
  return p.gone;
}

PeerState ShmTransport::peer_state(int peer_rank, std::string* detail) {
  Peer& p = peer(peer_rank);
  if (exited(p)) {
    if (detail != nullptr) *detail = "process of rank " + std::to_string(peer_rank) + " exited";
    return PeerState::closed;
  }
  if (p.rx->ctl.left.load(std::memory_order_acquire) == 0) return PeerState::ok;
  if (detail != nullptr)
    *detail = "rank " + std::to_string(peer_rank) + " failed and left (its own record says why)";
  return PeerState::left;
}

void ShmTransport::leave() noexcept {
  // The flag goes into the mailbox this rank writes (in the peer's segment, which the peer
  // reads as its rx); then a wake-up of whatever the peer sleeps on: its data wait on `head`
  // of that mailbox, its credit wait on `tail` of its mailbox here (rx). A peer between its
  // check and its sleep misses the wake and sees the flag after its slice (at most 20 ms).
  for (const auto& p : peers_) {
    if (!p || p->rx == nullptr || p->tx == nullptr) continue;
    p->tx->ctl.left.store(1, std::memory_order_seq_cst);
    futex(&p->tx->ctl.head, FUTEX_WAKE, std::numeric_limits<std::int32_t>::max(), nullptr);
    futex(&p->rx->ctl.tail, FUTEX_WAKE, std::numeric_limits<std::int32_t>::max(), nullptr);
  }
}

}  // namespace spark::transport
