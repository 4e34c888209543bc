#include "transport/verbs/verbs_transport.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fabric/rdma_lanes.hpp"
#include "spark/error.hpp"
#include "transport/verbs/verbs_relay.hpp"
#include "verbs/verbs_error.hpp"

namespace spark::transport {
using namespace spark::verbs;

namespace {

constexpr std::size_t kHeaderArea = 64;  // MsgHeader (40 B) + pad; the flag is its last word
constexpr std::size_t kFlagOffset = 56;
constexpr char kGoodbye = 'B';  // on the liveness connection: "my transport ended cleanly"
constexpr char kFailed = 'F';   // on the liveness connection: "I failed and left" (leave())
constexpr std::size_t kCreditArea = 64;
static_assert(sizeof(MsgHeader) <= kFlagOffset);

std::uint64_t load_acquire(const std::byte* p) {
  // The NIC writes these words; the acquire orders the following payload reads after them.
  return std::atomic_ref<std::uint64_t>(
             *reinterpret_cast<std::uint64_t*>(const_cast<std::byte*>(p)))
      .load(std::memory_order_acquire);
}

void put_u32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
std::uint32_t get_u32(std::string_view s, std::size_t& pos) {
  if (s.size() - pos < 4) throw VerbsError("malformed RoCE endpoint list (truncated)");
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(s[pos + i])) << (8 * i);
  pos += 4;
  return v;
}

struct FreeMem {
  void operator()(std::byte* p) const noexcept { std::free(p); }
};

}  // namespace

struct VerbsTransport::Lane : OpenPort {
  // Destroyed before the port's CQ, PD and context: the MR, then its memory.
  explicit Lane(OpenPort p) : OpenPort(std::move(p)) {}
  std::unique_ptr<std::byte, FreeMem> mem;
  MemoryRegion mr;
  // Receives (flags and credits arrive as WRITE WITH IMMEDIATE) complete here; the channel
  // wakes a blocked wait when they do, instead of sleeping in slices.
  CompletionChannel channel;
  CompletionQueue rx_cq;
};

std::size_t VerbsTransport::stride() const noexcept {
  return (kHeaderArea + opt_.slot_bytes + 63) / 64 * 64;
}
std::size_t VerbsTransport::region_bytes() const noexcept {
  return opt_.slots * stride() + kCreditArea;
}
std::uint64_t VerbsTransport::wr_id(int peer_rank, int lane) const noexcept {
  return (static_cast<std::uint64_t>(peer_rank) << 8) | static_cast<std::uint64_t>(lane);
}

VerbsTransport::VerbsTransport(int rank, int size, std::vector<int> peers, VerbsOptions options)
    : rank_(rank), size_(size), peer_ranks_(std::move(peers)), opt_(std::move(options)) {
  if (opt_.slots == 0 || opt_.slot_bytes == 0 || opt_.slot_bytes > (1u << 30))
    throw InvalidUsage("RoCE transport: slots and slot_bytes must be positive");
  if (opt_.devices.empty()) opt_.devices = device_names();
  if (opt_.devices.size() > 64) throw InvalidUsage("RoCE transport: at most 64 lanes");
  timeouts_ = qp_timeouts(opt_.timeout_ms);
  max_wr_ = static_cast<int>(3 * opt_.slots + 4);
  // Per link at most `slots` flags and `slots` credits arrive between two reposts (each send
  // and release reposts); twice that leaves room.
  recv_depth_ = static_cast<int>(4 * opt_.slots + 8);

  // Which devices each peer's links use (peer_lanes), and how many links each device holds.
  auto links_of = [&](int r) {
    std::vector<int> devs;
    if (static_cast<std::size_t>(r) < opt_.peer_lanes.size())
      devs = opt_.peer_lanes[static_cast<std::size_t>(r)];
    if (devs.empty())
      for (std::size_t d = 0; d < opt_.devices.size(); ++d) devs.push_back(static_cast<int>(d));
    for (int d : devs)
      if (d < 0 || d >= static_cast<int>(opt_.devices.size()))
        throw InvalidUsage("RoCE transport: peer lane outside the device list");
    if (devs.size() > 63) throw InvalidUsage("RoCE transport: at most 63 links per peer");
    return devs;
  };
  std::vector<std::size_t> on_dev(opt_.devices.size(), 0);
  for (int r : peer_ranks_)
    for (int d : links_of(r)) ++on_dev[static_cast<std::size_t>(d)];
  const std::size_t per_peer = region_bytes() + opt_.slots * stride();
  std::size_t pinned = 0;
  for (std::size_t n : on_dev)
    pinned += (per_peer * std::max<std::size_t>(n, 1) + 4095) / 4096 * 4096;
  check_memlock(pinned);

  std::optional<std::string> gid_override;
  if (opt_.gid_index) gid_override = std::to_string(*opt_.gid_index);
  for (std::size_t d = 0; d < opt_.devices.size(); ++d) {
    const std::string& dev = opt_.devices[d];
    const int links = static_cast<int>(std::max<std::size_t>(on_dev[d], 1));
    const std::size_t bytes = (per_peer * static_cast<std::size_t>(links) + 4095) / 4096 * 4096;
    auto lane = std::make_unique<Lane>(
        open_port(dev, opt_.port, opt_.sysfs_root, gid_override, links * max_wr_ + 16));
    void* p = std::aligned_alloc(4096, bytes);
    if (p == nullptr) throw std::bad_alloc();
    lane->mem.reset(static_cast<std::byte*>(p));
    std::memset(p, 0, bytes);
    lane->mr = register_memory(lane->pd, p, bytes);
    lane->channel = create_comp_channel(lane->ctx);
    lane->rx_cq = create_cq(lane->ctx, links * recv_depth_ + 16, lane->channel.get());
    lanes_.push_back(std::move(lane));
  }

  peers_.resize(static_cast<std::size_t>(size_));
  std::vector<std::size_t> used(lanes_.size(), 0);  // regions handed out per device
  for (int r : peer_ranks_) {
    if (r < 0 || r >= size_ || r == rank_) throw InvalidUsage("RoCE transport: bad peer rank");
    auto pr = std::make_unique<Peer>();
    for (int d : links_of(r)) {
      Lane& lane = *lanes_[static_cast<std::size_t>(d)];
      Link l;
      l.dev = d;
      l.rx = lane.mem.get() + per_peer * used[static_cast<std::size_t>(d)]++;
      l.tx = l.rx + region_bytes();
      l.qp = create_rc_qp(lane.pd, lane.cq, max_wr_, &lane.rx_cq, recv_depth_);
      l.local = local_endpoint(lane, l.qp, lane.mr, l.rx, region_bytes());
      pr->use.push_back(static_cast<int>(pr->links.size()));
      pr->links.push_back(std::move(l));
    }
    peers_[static_cast<std::size_t>(r)] = std::move(pr);
  }
  if (opt_.liveness) open_listener();
}

VerbsTransport::~VerbsTransport() {
  relay_.reset();  // drains what it forwards for others before our own links go
  // Goodbye byte first (see send_idle); only to peers we are on good terms with.
  for (auto& p : peers_)
    if (p && p->live_fd >= 0) {
      if (p->error.empty() && !left_)
        (void)!::send(p->live_fd, &kGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(p->live_fd);
    }
}

void VerbsTransport::open_listener() {
  // On every address: in a triangle each peer is reached over a different cable, so the peer
  // connects to the address of the lane that links it to us (its link 0's remote GID).
  if (lanes_.empty()) return;
  listener_.emplace(0, "RoCE liveness", 0, static_cast<int>(peer_ranks_.size()) + 8, opt_.ports);
}

void VerbsTransport::connect_liveness(const std::vector<std::uint16_t>& ports) {
  if (!listener_) return;
  const std::chrono::milliseconds bound(std::max<std::uint32_t>(opt_.timeout_ms, 10000));
  // A pair keeps a liveness connection when both ends of its link 0 have an IPv4 GID (both
  // ends see both GIDs, so both agree) and the peer listens. The lower rank connects to the
  // higher one's link-0 address (the cable between them; their listen backlog accepts before
  // they call accept), then accepts the lower ones: no ordering deadlock.
  auto ipv4_of = [](const Gid& g) { return is_ipv4_mapped(g) ? gid_ipv4(g) : 0u; };  // host order
  auto paired = [&](int r) {
    const Link& l = peer(r).links.front();
    return ipv4_of(l.local.gid) != 0 && ipv4_of(l.remote.gid) != 0 &&
           ports[static_cast<std::size_t>(r)] != 0;
  };
  int lower = 0;
  for (int r : peer_ranks_) {
    if (!paired(r)) continue;
    if (r < rank_) {
      ++lower;
      continue;
    }
    std::string why;
    const Link& l0 = peer(r).links.front();
    net::Fd fd = net::connect_within(0, ipv4_of(l0.remote.gid), ports[static_cast<std::size_t>(r)],
                                     bound, &why);
    if (!fd)
      throw VerbsError("RoCE liveness: rank " + std::to_string(rank_) + " cannot connect to rank " +
                       std::to_string(r) + " on " + l0.local.device + ": " + why);
    std::int32_t me = rank_;  // into an empty send buffer: never blocks
    if (::send(fd.get(), &me, sizeof me, MSG_NOSIGNAL) != sizeof me)
      throw VerbsError("RoCE liveness: cannot greet rank " + std::to_string(r));
    peer(r).live_fd = fd.release();
  }
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (lower > 0) {
    pollfd pfd{listener_->fd(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(&pfd, 1, static_cast<int>(left.count())) <= 0)
      throw VerbsError("RoCE liveness: " + std::to_string(lower) +
                       " lower-ranked peer(s) never connected");
    int fd = ::accept4(listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::int32_t who = -1;
    pollfd rp{fd, POLLIN, 0};
    if (::poll(&rp, 1, 5000) <= 0 || ::recv(fd, &who, sizeof who, MSG_WAITALL) != sizeof who ||
        who < 0 || who >= rank_ || !peers_[static_cast<std::size_t>(who)] ||
        peer(who).live_fd >= 0) {
      ::close(fd);
      continue;
    }
    peer(who).live_fd = fd;
    --lower;
  }
}

bool VerbsTransport::check_alive(Peer& p, int peer_rank) {
  if (p.closed) return false;
  if (p.live_fd < 0) return true;
  pollfd pfd{p.live_fd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return true;
  // After the greeting only a goodbye or a failed byte travels here, then the close.
  char buf[8];
  for (;;) {
    ssize_t n = ::recv(p.live_fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      if (std::memchr(buf, kGoodbye, static_cast<std::size_t>(n)) != nullptr) p.finished = true;
      if (std::memchr(buf, kFailed, static_cast<std::size_t>(n)) != nullptr) {
        p.closed = true;
        if (p.error.empty()) {
          p.error =
              "rank " + std::to_string(peer_rank) + " failed and left (its own record says why)";
          p.left = true;
        }
        break;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    p.closed = true;
    if (p.error.empty()) {
      p.error = "rank " + std::to_string(peer_rank) + " closed its connection (process gone)";
      p.closed_first = true;
    }
    break;
  }
  return !p.closed;
}

std::string VerbsTransport::endpoint() const {
  std::vector<std::pair<int, int>> self;
  for (int r : peer_ranks_) self.emplace_back(r, r);
  return endpoint_blob(self, listener_ ? listener_->port() : -1);
}

std::string VerbsTransport::endpoint_as(const std::vector<std::pair<int, int>>& peer_to) const {
  return endpoint_blob(peer_to, -1);  // a relayed pair has no connection of its own
}

std::string VerbsTransport::endpoint_blob(const std::vector<std::pair<int, int>>& peer_to,
                                          int listener_port) const {
  std::string out;
  put_u32(out, listener_port >= 0 ? 1 : 0);  // a liveness listener on every address
  put_u32(out, listener_port >= 0 ? static_cast<std::uint32_t>(listener_port) : 0);
  std::size_t n = 0;
  for (auto [r, to] : peer_to) n += peer(r).links.size();
  put_u32(out, static_cast<std::uint32_t>(n));
  for (auto [r, to] : peer_to) {
    for (std::size_t k = 0; k < peer(r).links.size(); ++k) {
      auto bytes = serialize(peer(r).links[k].local);
      put_u32(out, static_cast<std::uint32_t>(to));
      put_u32(out, static_cast<std::uint32_t>(k));
      put_u32(out, static_cast<std::uint32_t>(bytes.size()));
      out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
  }
  return out;
}

void VerbsTransport::adopt_relay(std::unique_ptr<VerbsRelay> relay) {
  relay_ = std::move(relay);
}

int VerbsTransport::via(int peer_rank) const noexcept {
  return static_cast<std::size_t>(peer_rank) < opt_.peer_via.size()
             ? opt_.peer_via[static_cast<std::size_t>(peer_rank)]
             : -1;
}

VerbsOptions verbs_options(const CommOptions& c) {
  VerbsOptions o;
  if (c.rdma_lanes)
    o.devices = spark::fabric::parse_rdma_devices(*c.rdma_lanes, "SPARK_LANES");
  else if (c.ib_hca)
    o.devices = spark::fabric::parse_rdma_devices(*c.ib_hca, "SPARK_IB_HCA");
  o.gid_index = c.ib_gid_index;
  o.timeout_ms = c.timeout_ms;
  o.slots = c.slots;
  o.slot_bytes = c.roce_slot_bytes;
  o.ports = {c.tcp_ports.first, c.tcp_ports.second};
  return o;
}

void VerbsTransport::connect_all(const std::vector<std::string>& endpoints) {
  std::vector<std::uint16_t> ports(static_cast<std::size_t>(size_), 0);
  for (int r : peer_ranks_)
    ports[static_cast<std::size_t>(r)] =
        connect_peer(r, endpoints.at(static_cast<std::size_t>(r)), rank_);
  connect_liveness(ports);
}

std::uint16_t VerbsTransport::connect_peer(int r, const std::string& blob, int as_rank) {
  Peer& p = peer(r);
  std::size_t pos = 0;
  const bool listens = get_u32(blob, pos) != 0;
  const auto port = static_cast<std::uint16_t>(get_u32(blob, pos));
  std::uint32_t n = get_u32(blob, pos);
  std::vector<bool> got(p.links.size(), false);
  for (std::uint32_t k = 0; k < n; ++k) {
    std::uint32_t to = get_u32(blob, pos), link = get_u32(blob, pos), len = get_u32(blob, pos);
    if (blob.size() - pos < len)
      throw VerbsError("malformed RoCE endpoint list from rank " + std::to_string(r));
    std::string_view ep(blob.data() + pos, len);
    pos += len;
    if (static_cast<int>(to) != as_rank) continue;
    if (link >= p.links.size()) {
      throw VerbsError("rank " + std::to_string(r) + " opened more RoCE links toward rank " +
                       std::to_string(as_rank) + " than rank " + std::to_string(as_rank) +
                       " has toward it (" + std::to_string(p.links.size()) +
                       "): give every rank the same number of lanes (SPARK_LANES / SPARK_IB_HCA)");
    }
    Link& l = p.links[link];
    l.remote = deserialize({reinterpret_cast<const std::byte*>(ep.data()), ep.size()});
    if (l.remote.bytes != region_bytes()) {
      throw VerbsError("rank " + std::to_string(r) + " lays out its RoCE mailbox differently (" +
                       std::to_string(l.remote.bytes) + " bytes vs " +
                       std::to_string(region_bytes()) +
                       "): run the same build with the same SPARK_SLOTS / slot size on every rank");
    }
    connect_rc_qp(l.qp, l.local, l.remote, r, timeouts_);
    for (int i = 0; i < recv_depth_; ++i)
      if (int rc = post_recv(l.qp.get(), wr_id(r, static_cast<int>(link))); rc != 0)
        throw VerbsError(
            call_failed("ibv_post_recv (rank " + std::to_string(r) + ")", l.local.device, rc));
    got[link] = true;
  }
  for (std::size_t k = 0; k < p.links.size(); ++k) {
    if (!got[k]) {
      throw VerbsError("rank " + std::to_string(r) + " published no endpoint for link " +
                       std::to_string(k) + " (" + p.links[k].local.device + ") of rank " +
                       std::to_string(as_rank) +
                       ": give every rank the same number of lanes (SPARK_LANES / SPARK_IB_HCA)");
    }
  }
  return listens ? port : 0;
}

std::vector<ProbeFailure> VerbsTransport::probe(std::chrono::milliseconds timeout) {
  // One 8-byte WRITE per link into the word after the peer's credit word (nobody reads it),
  // signaled, marked by bits 6 and 7 of the work request id.
  static const std::uint64_t kProbeValue = 1;
  for (int r : peer_ranks_) {
    Peer& p = peer(r);
    for (std::size_t k = 0; k < p.links.size(); ++k) {
      Link& l = p.links[k];
      int rc = post_write(l.qp.get(), wr_id(r, static_cast<int>(k)) | (3u << 6), &kProbeValue,
                          sizeof kProbeValue, 0, l.remote.addr + opt_.slots * stride() + 8,
                          l.remote.rkey, true, true);
      if (rc != 0) {
        l.probe = 2;
        l.probe_error = call_failed("ibv_post_send (RDMA probe)", l.local.device, rc);
      } else {
        ++l.outstanding;
      }
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (std::size_t li = 0; li < lanes_.size(); ++li) poll_lane(li);
    bool pending = false;
    for (int r : peer_ranks_)
      for (const Link& l : peer(r).links) pending = pending || l.probe == 0;
    if (!pending || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<ProbeFailure> out;
  for (int r : peer_ranks_) {
    Peer& p = peer(r);
    for (std::size_t k = 0; k < p.links.size(); ++k) {
      Link& l = p.links[k];
      if (l.probe == 1) continue;
      if (l.probe == 0) {
        l.probe = 2;
        l.probe_error = "RDMA WRITE probe on " + l.local.device + " not completed after " +
                        std::to_string(timeout.count()) + " ms";
      }
      out.push_back({r, static_cast<int>(k), l.probe_error});
    }
  }
  return out;
}

void VerbsTransport::drop_link(int peer_rank, int link, const std::string& why) {
  Peer& p = peer(peer_rank);
  auto it = std::find(p.use.begin(), p.use.end(), link);
  if (it == p.use.end()) return;
  p.use.erase(it);
  if (p.use.empty())
    throw VerbsError("RoCE: no lane to rank " + std::to_string(peer_rank) +
                     " passed the RDMA WRITE probe (last: " + why +
                     "); check the cables and `sparkrun doctor`, or run with SPARK_TRANSPORT=tcp");
}

std::string VerbsTransport::describe() const {
  std::string out;
  for (const auto& l : lanes_) {
    out += l->name + ": GID[" + std::to_string(l->gid.index) + "] " + gid_text(l->gid.gid) + " (" +
           l->gid.source + "), path MTU " + std::to_string(l->mtu()) + ", QP timeout 2^" +
           std::to_string(timeouts_.timeout) + " x 4.096 us x " +
           std::to_string(timeouts_.retry_cnt + 1) + " = " +
           std::to_string(static_cast<long>(timeouts_.give_up_ms)) + " ms\n";
  }
  return out;
}

std::string VerbsTransport::lane_name(int peer_rank, WaitKind kind) const {
  const Peer& p = peer(peer_rank);
  std::uint64_t i = kind == WaitKind::data                          ? p.rx_count
                    : (kind == WaitKind::credit || p.tx_count == 0) ? p.tx_count
                                                                    : p.tx_count - 1;
  const std::string& dev = p.links[static_cast<std::size_t>(p.use[i % p.use.size()])].local.device;
  // Relayed: "via r<R>/<dev>" (this rank's device toward the relay; the record's lane field
  // holds 31 characters, device names at most 20), the relaying host in lane_detail.
  const int v = via(peer_rank);
  return v < 0 ? dev : "via r" + std::to_string(v) + "/" + dev;
}

std::vector<std::string> VerbsTransport::lane_names(int peer_rank) const {
  const Peer& p = peer(peer_rank);
  const int v = via(peer_rank);
  std::vector<std::string> names;
  for (const int link : p.use) {
    const std::string& dev = p.links[static_cast<std::size_t>(link)].local.device;
    names.push_back(v < 0 ? dev : "via r" + std::to_string(v) + "/" + dev);
  }
  return names;
}

std::size_t VerbsTransport::lane_index(int peer_rank, WaitKind kind) const noexcept {
  const Peer& p = peer(peer_rank);
  if (p.use.empty()) return 0;
  return static_cast<std::size_t>((kind == WaitKind::data ? p.rx_count : p.tx_count) %
                                  p.use.size());
}

std::string VerbsTransport::lane_detail(int peer_rank, WaitKind) const {
  const int v = via(peer_rank);
  if (v < 0) return {};
  const std::string host = static_cast<std::size_t>(peer_rank) < opt_.via_host.size()
                               ? opt_.via_host[static_cast<std::size_t>(peer_rank)]
                               : std::string("?");
  return "relayed by rank " + std::to_string(v) + " on host " + host;
}

bool VerbsTransport::room(Link& l, int wrs) {
  if (l.outstanding + wrs <= max_wr_) return true;
  for (std::size_t li = 0; li < lanes_.size(); ++li) poll_lane(li);
  return l.outstanding + wrs <= max_wr_;
}

bool VerbsTransport::can_send(int peer_rank) {
  Peer& p = peer(peer_rank);
  if (!p.error.empty()) return false;
  Link& l = tx_link(p);
  std::uint64_t credited = load_acquire(l.rx + opt_.slots * stride());
  return l.tx_sent - credited < opt_.slots && room(l, 2);
}

void VerbsTransport::send(int peer_rank, const MsgHeader& header, const void* data) {
  Peer& p = peer(peer_rank);
  const int lane = p.use[p.tx_count % p.use.size()];
  Link& l = p.links[static_cast<std::size_t>(lane)];
  if (header.bytes > opt_.slot_bytes)
    throw InvalidUsage("RoCE transport: message larger than a slot");
  const std::size_t off = (l.tx_sent % opt_.slots) * stride();
  std::byte* st = l.tx + off;
  std::memcpy(st, &header, sizeof header);  // staging flag word stays 0: the flag goes inline
  if (header.bytes > 0) std::memcpy(st + kHeaderArea, data, header.bytes);
  const std::uint64_t flag = l.tx_sent + 1;
  const Lane& ln = *lanes_[static_cast<std::size_t>(l.dev)];
  // Header + payload first, then the flag (inline: copied at post time), on one RC QP.
  int rc = post_write(l.qp.get(), wr_id(peer_rank, lane), st,
                      static_cast<std::uint32_t>(kHeaderArea + header.bytes), ln.mr->lkey,
                      l.remote.addr + off, l.remote.rkey, false);
  if (rc == 0) {
    // With immediate: the peer's receive completion wakes it if it is blocked (block()).
    rc = post_write_imm(l.qp.get(), wr_id(peer_rank, lane) | (1u << 7), &flag, sizeof flag, 0,
                        l.remote.addr + off + kFlagOffset, l.remote.rkey, true, true, 0);
  }
  if (rc != 0) {
    if (p.error.empty())
      p.error = call_failed("ibv_post_send (RDMA write to rank " + std::to_string(peer_rank) + ")",
                            ln.name, rc);
    return;
  }
  l.outstanding += 2;
  ++l.data_outstanding;
  ++l.tx_sent;
  ++p.tx_count;
  poll_rx(static_cast<std::size_t>(l.dev));  // keep the peer's receives posted
}

bool VerbsTransport::send_idle(int peer_rank) {
  // Only data counts: credit writes are fire-and-forget (cumulative), and a peer that has
  // finished may exit before our last credit reaches it; waiting for that completion would
  // turn a clean exit into a "peer closed" failure.
  // Data writes to a peer that said goodbye (its transport was destroyed cleanly) count as
  // done too: on a real wire it can read our data and exit before its NIC has sent the ACK
  // (seen between two VMs; rxe loopback never showed it). A killed peer says nothing, so a
  // crash still fails the wait.
  Peer& p = peer(peer_rank);
  for (const Link& l : p.links)
    if (l.data_outstanding > 0) {
      for (std::size_t li = 0; li < lanes_.size(); ++li) poll_lane(li);
      break;
    }
  for (const Link& l : p.links)
    if (l.data_outstanding > 0) {
      check_alive(p, peer_rank);
      return p.finished;
    }
  return true;
}

RecvView VerbsTransport::peek(int peer_rank) {
  Peer& p = peer(peer_rank);
  Link& l = rx_link(p);
  const std::byte* slot = l.rx + (l.rx_seen % opt_.slots) * stride();
  if (load_acquire(slot + kFlagOffset) != l.rx_seen + 1) return {};
  return RecvView{reinterpret_cast<const MsgHeader*>(slot), slot + kHeaderArea};
}

void VerbsTransport::post_credit(int peer_rank, int lane, Link& l) {
  if (!room(l, 1)) {
    l.credit_dirty = true;
    return;
  }
  const std::uint64_t value = l.rx_seen;  // cumulative: a later write supersedes this one
  int rc = post_write_imm(l.qp.get(), wr_id(peer_rank, lane) | (1u << 6), &value, sizeof value, 0,
                          l.remote.addr + opt_.slots * stride(), l.remote.rkey, true, true, 0);
  if (rc != 0) {
    Peer& p = peer(peer_rank);
    if (p.error.empty())
      p.error = call_failed("ibv_post_send (credit to rank " + std::to_string(peer_rank) + ")",
                            l.local.device, rc);
    return;
  }
  ++l.outstanding;
  l.credit_dirty = false;
}

void VerbsTransport::release(int peer_rank) {
  Peer& p = peer(peer_rank);
  const int lane = p.use[p.rx_count % p.use.size()];
  Link& l = p.links[static_cast<std::size_t>(lane)];
  ++l.rx_seen;
  ++p.rx_count;
  post_credit(peer_rank, lane, l);
  poll_rx(static_cast<std::size_t>(l.dev));
}

int VerbsTransport::poll_rx(std::size_t li) {
  Lane& lane = *lanes_[li];
  ibv_wc wc[16];
  int n = 0, total = 0;
  while ((n = ibv_poll_cq(lane.rx_cq.get(), 16, wc)) > 0) {
    total += n;
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(wc[i].wr_id >> 8);
      if (r < 0 || r >= size_ || !peers_[static_cast<std::size_t>(r)]) continue;
      Peer& p = peer(r);
      if (wc[i].status != IBV_WC_SUCCESS) {
        // A link no longer in use (failed its probe) may flush its receives: not an error.
        const int k = static_cast<int>(wc[i].wr_id & 63);
        if (std::find(p.use.begin(), p.use.end(), k) == p.use.end()) continue;
        if (p.error.empty())
          p.error = "RDMA receive from rank " + std::to_string(r) + " on lane " + lane.name +
                    " failed: " + completion_error(wc[i]);
        continue;
      }
      const std::size_t k = wc[i].wr_id & 63;
      if (k >= p.links.size()) continue;
      if (int rc = post_recv(p.links[k].qp.get(), wc[i].wr_id); rc != 0 && p.error.empty())
        p.error = call_failed("ibv_post_recv (rank " + std::to_string(r) + ")", lane.name, rc);
    }
  }
  if (n < 0) {
    for (int r : peer_ranks_)
      if (peer(r).error.empty()) peer(r).error = call_failed("ibv_poll_cq", lane.name, EIO);
  }
  return total;
}

void VerbsTransport::poll_lane(std::size_t li) {
  Lane& lane = *lanes_[li];
  ibv_wc wc[16];
  int n = 0;
  while ((n = ibv_poll_cq(lane.cq.get(), 16, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const int r = static_cast<int>(wc[i].wr_id >> 8);
      if (r < 0 || r >= size_ || !peers_[static_cast<std::size_t>(r)]) continue;
      Peer& p = peer(r);
      const std::size_t k = wc[i].wr_id & 63;
      if (k >= p.links.size()) continue;
      Link& l = p.links[k];
      const std::uint64_t marks = wc[i].wr_id & (3u << 6);
      if (marks == (3u << 6)) {  // the RDMA probe (probe())
        --l.outstanding;
        l.probe = wc[i].status == IBV_WC_SUCCESS ? 1 : 2;
        if (l.probe == 2)
          l.probe_error =
              "RDMA WRITE probe on " + lane.name + " failed: " + completion_error(wc[i]);
        continue;
      }
      // A flag completion (bit 7) retires the flag and the unsignaled data write before it; a
      // credit (bit 6) itself. A data write only completes on its own when flushed in error.
      l.outstanding -= (marks & (1u << 7)) ? 2 : (marks & (1u << 6)) ? 1 : 0;
      if (marks & (1u << 7)) --l.data_outstanding;
      if (std::find(p.use.begin(), p.use.end(), static_cast<int>(k)) == p.use.end()) continue;
      if (wc[i].status != IBV_WC_SUCCESS && p.error.empty()) {
        p.error = "RDMA write to rank " + std::to_string(r) + " on lane " + lane.name +
                  " failed: " + completion_error(wc[i]);
      }
    }
  }
  if (n < 0) {
    for (int r : peer_ranks_)
      if (peer(r).error.empty()) peer(r).error = call_failed("ibv_poll_cq", lane.name, EIO);
  }
}

void VerbsTransport::progress() {
  for (std::size_t li = 0; li < lanes_.size(); ++li) {
    poll_lane(li);
    poll_rx(li);
  }
  for (int r : peer_ranks_) {
    Peer& p = peer(r);
    for (std::size_t li = 0; li < p.links.size(); ++li)
      if (p.links[li].credit_dirty) post_credit(r, static_cast<int>(li), p.links[li]);
  }
}

bool VerbsTransport::has_pending() const noexcept {
  for (int r : peer_ranks_)
    for (const Link& l : peer(r).links)
      if (l.credit_dirty) return true;
  return false;
}

void VerbsTransport::block(int, WaitKind kind, std::chrono::microseconds max) {
  if (kind == WaitKind::send_done) {
    // Our own write completions raise no event here: they come within microseconds.
    progress();
    std::this_thread::sleep_for(std::min(max, std::chrono::microseconds(20)));
    return;
  }
  // Data and credits arrive as WRITE WITH IMMEDIATE: arm every lane's receive CQ, look once
  // more (a completion that came before the arming raised no event), then sleep on the
  // completion channels until one fires or `max` passes. Was: sleeps of 50 us, so a message
  // that came just after the spin waited up to 50 us more.
  std::vector<pollfd> fds;
  fds.reserve(lanes_.size() + peer_ranks_.size());
  for (auto& lane : lanes_) {
    drain_events(*lane);
    ibv_req_notify_cq(lane->rx_cq.get(), 0);
    fds.push_back({lane->channel->fd, POLLIN, 0});
  }
  // A peer's liveness connection too: its death (or goodbye, or failed byte) ends the sleep at
  // once. Read first: a connection that already ended stays readable and would end every
  // sleep at once (a busy loop until this wait's deadline); it is marked closed instead.
  for (int r : peer_ranks_)
    if (Peer& p = peer(r); p.live_fd >= 0 && check_alive(p, r))
      fds.push_back({p.live_fd, POLLIN, 0});
  int seen = 0;
  for (std::size_t li = 0; li < lanes_.size(); ++li) {
    poll_lane(li);
    seen += poll_rx(li);
  }
  if (seen > 0) return;
  timespec ts{static_cast<time_t>(max.count() / 1000000),
              static_cast<long>((max.count() % 1000000) * 1000)};
  if (::ppoll(fds.data(), fds.size(), &ts, nullptr) > 0)
    for (auto& lane : lanes_) drain_events(*lane);
}

void VerbsTransport::drain_events(Lane& lane) {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(lane.channel.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

void VerbsTransport::leave() noexcept {
  left_ = true;
  for (auto& p : peers_)
    if (p && p->live_fd >= 0) (void)!::send(p->live_fd, &kFailed, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

PeerState VerbsTransport::peer_state(int peer_rank, std::string* detail) {
  progress();
  Peer& p = peer(peer_rank);
  check_alive(p, peer_rank);
  if (p.error.empty()) return PeerState::ok;
  if (detail != nullptr) *detail = p.error;
  if (p.left) return PeerState::left;
  // A write that failed before the close (a cable down, then the peer gave up) is the cause.
  return p.closed_first ? PeerState::closed : PeerState::error;
}

}  // namespace spark::transport
