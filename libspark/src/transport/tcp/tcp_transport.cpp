#include "transport/tcp/tcp_transport.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fabric/local_lanes.hpp"
#include "log/log.hpp"
#include "net/hello_exchange.hpp"
#include "net/socket.hpp"
#include "spark/error.hpp"

namespace spark::transport {

namespace {

constexpr std::uint32_t kData = 1;
constexpr std::uint32_t kCredit = 2;
constexpr std::size_t kSlotHeader = 64;       // header area in front of each rx payload
constexpr std::size_t kRxBuffer = 16 * 1024;  // small frames arrive whole through this

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// Reads or writes exactly n bytes before the deadline (wire-up only).
bool io_exact(int fd, void* buf, std::size_t n, bool write, Clock::time_point deadline) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    if (::poll(&pfd, 1, remaining_ms(deadline)) <= 0) return false;
    ssize_t r = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// A blocking socket connected to ip:port (leaving through `bind_ipv4`'s lane when set)
// before the deadline; -1 with *why otherwise.
int connect_to(const std::string& ip, int port, Clock::time_point deadline, std::string* why,
               std::uint32_t bind_ipv4 = 0) {
  in_addr a{};
  if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) {
    *why = "bad address " + ip;
    return -1;
  }
  net::Fd fd = net::connect_within(bind_ipv4, ntohl(a.s_addr), port,
                                   std::chrono::milliseconds(remaining_ms(deadline)), why);
  if (!fd) return -1;
  set_nonblocking(fd.get(), false);
  return fd.release();
}

}  // namespace

TcpTransport::TcpTransport(int rank, int size, std::vector<int> peers, TcpOptions options)
    : rank_(rank), peer_ranks_(std::move(peers)), opt_(std::move(options)) {
  if (opt_.lanes < 1) opt_.lanes = 1;
  peers_.resize(static_cast<std::size_t>(size));
  in_addr at{};  // INADDR_ANY unless SPARK_TCP_ADDR is set
  if (opt_.addr) {
    if (::inet_pton(AF_INET, opt_.addr->c_str(), &at) != 1)
      throw ConfigError("SPARK_TCP_ADDR='" + *opt_.addr + "' is not an IPv4 address");
    addrs_.push_back(*opt_.addr);
  }
  listener_.emplace(ntohl(at.s_addr),
                    opt_.addr ? "SPARK_TCP_ADDR=" + *opt_.addr + " (tcp transport)"
                              : std::string("every address (tcp transport)"),
                    0, 256, opt_.ports);
  port_ = listener_->port();
  if (opt_.ports.first != 0 && opt_.log_dropped)  // SPARK_LOG=info:tcp; which port it took
    log::line("tcp", "listening on port " + std::to_string(port_) + " of SPARK_TCP_PORT_RANGE=" +
                         std::to_string(opt_.ports.first) + "-" + std::to_string(opt_.ports.last));
  if (!opt_.addr && !opt_.data_net.empty()) {
    // Data lanes only (docs/fabric.md): control-only interfaces are never published.
    data_lanes_ = fabric::local_lanes(fabric::parse_nets(opt_.data_net, "SPARK_DATA_NET"));
    if (data_lanes_.empty())
      throw ConfigError("SPARK_DATA_NET='" + opt_.data_net +
                        "' selects no up IPv4 interface on this node; list the data subnets "
                        "(see `ip -4 addr`) or unset it");
    for (const auto& l : data_lanes_) addrs_.push_back(fabric::format_ipv4(l.ipv4));
    addrs_.emplace_back("127.0.0.1");
  } else if (!opt_.addr) {
    ifaddrs* ifs = nullptr;
    if (::getifaddrs(&ifs) == 0) {
      for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
        if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
        char buf[INET_ADDRSTRLEN];
        auto* in = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
        if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf) != nullptr)
          addrs_.emplace_back(buf);
      }
      ::freeifaddrs(ifs);
    }
    addrs_.emplace_back("127.0.0.1");
  }
}

TcpTransport::~TcpTransport() {
  // Own connections first: other ranks' relays (and this one) wait for their ends to close,
  // so closing ours before draining our relay keeps two relaying ranks from waiting on each
  // other until the idle bound.
  for (Conn* c : all_)
    if (c->fd >= 0) ::close(c->fd);
  listener_.reset();
  relay_.reset();  // bounded: forwards until the ends it serves have finished
}

std::string TcpTransport::endpoint() const {
  std::string s;
  for (const auto& a : addrs_) s += (s.empty() ? "" : ",") + a;
  return s + ";" + std::to_string(port_);
}

void TcpTransport::setup_conn(Conn& c, int fd, int lane, std::string name, std::string via) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblocking(fd, true);
  c.fd = fd;
  c.lane = lane;
  c.name = std::move(name);
  c.via = std::move(via);
  // Allocated and touched once: fresh pages cost ~12 us per 4 KiB, far too much per call.
  std::size_t rx = opt_.slots * (kSlotHeader + opt_.slot_bytes);
  c.rx_slots = std::make_unique<std::byte[]>(rx);
  std::memset(c.rx_slots.get(), 0, rx);
  // Room for a whole piece: what a scatter read brought past a shorter frame (take_ahead).
  c.rx_buf = std::make_unique<std::byte[]>(std::max(kRxBuffer, opt_.slot_bytes));
  c.tx_slots = std::make_unique<std::byte[]>(opt_.slots * opt_.slot_bytes);
  std::memset(c.tx_slots.get(), 0, opt_.slots * opt_.slot_bytes);
  c.credits = static_cast<std::uint32_t>(opt_.slots);
  all_.push_back(&c);
}

std::string relayed_lane_name(int relay_rank, const std::string& lane) {
  return "tcp:via r" + std::to_string(relay_rank) + "/" + lane;
}

std::string relayed_lane_detail(const std::string& relay_host, int relay_rank) {
  return "relayed by rank " + std::to_string(relay_rank) + " on host " + relay_host;
}

std::vector<int> relay_path(const TcpFabric& f, int src, int dst) {
  std::vector<int> out;
  const int to = f.node_of[static_cast<std::size_t>(dst)];
  int cur = f.node_of[static_cast<std::size_t>(src)];
  for (int guard = 0; cur != to && guard < f.map.size(); ++guard) {
    const auto& r = f.map.route(cur, to);
    if (r.kind != fabric::Route::Kind::relay) break;
    cur = r.via;
    out.push_back(f.speaker[static_cast<std::size_t>(cur)]);
  }
  return out;
}

namespace {

// Lane names in records: "tcp:to1" (direct), "tcp:via r1/to1" (through rank 1's relay; the
// lane is this node's lane toward the relaying node, whose host goes into hop_detail).
std::string hop_name(const TcpFabric& f, int me_node, int next_rank, bool relayed, int l) {
  const int next = f.node_of[static_cast<std::size_t>(next_rank)];
  const auto& r = f.map.route(me_node, next);
  const auto& pair = r.lanes[static_cast<std::size_t>(l) % r.lanes.size()];
  const std::string& lane =
      f.lanes[static_cast<std::size_t>(me_node)][static_cast<std::size_t>(pair.local)].name;
  if (!relayed) return "tcp:" + lane;
  return relayed_lane_name(next_rank, lane);
}

std::string hop_detail(const TcpFabric& f, int next_rank, bool relayed) {
  if (!relayed) return {};
  return relayed_lane_detail(
      f.hosts[static_cast<std::size_t>(f.node_of[static_cast<std::size_t>(next_rank)])], next_rank);
}

}  // namespace

std::pair<int, std::string> TcpTransport::open_hop(const TcpFabric& f, int src, int dst, int l,
                                                   Clock::time_point deadline) {
  using Kind = fabric::Route::Kind;
  const int me = f.node_of[static_cast<std::size_t>(rank_)];
  const int to = f.node_of[static_cast<std::size_t>(dst)];
  const auto& r = f.map.route(me, to);
  if (r.kind != Kind::direct && r.kind != Kind::relay)
    throw BootstrapError("tcp transport: no lane and no relay from node " +
                         f.hosts[static_cast<std::size_t>(me)] + " to node " +
                         f.hosts[static_cast<std::size_t>(to)] + " (rank " + std::to_string(dst) +
                         "); check the cabling with `sparkrun fabric`");
  const bool relayed = r.kind == Kind::relay;
  const int next = relayed ? r.via : to;
  const int target = relayed ? f.speaker[static_cast<std::size_t>(next)] : dst;
  const auto& hop = relayed ? f.map.route(me, next) : r;
  const auto& pair = hop.lanes[static_cast<std::size_t>(l) % hop.lanes.size()];
  const auto& mine = f.lanes[static_cast<std::size_t>(me)][static_cast<std::size_t>(pair.local)];
  const auto& theirs =
      f.lanes[static_cast<std::size_t>(next)][static_cast<std::size_t>(pair.remote)];
  std::string name = hop_name(f, me, target, relayed, l);
  std::string why;
  const std::string ip = fabric::format_ipv4(theirs.ipv4);
  int fd = connect_to(ip, f.ports[static_cast<std::size_t>(target)], deadline, &why, mine.ipv4);
  const std::string what =
      "rank " + std::to_string(rank_) + " cannot connect to rank " + std::to_string(target) +
      (src != rank_ ? " (relaying for rank " + std::to_string(src) + ")" : "") + " on lane " +
      name + " (" + fabric::format_ipv4(mine.ipv4) + " -> " + ip + ")";
  if (fd < 0) throw BootstrapError("tcp transport: " + what + ": " + why + "; check the cable");
  auto h = net::hello::encode(
      {relayed ? net::hello::Kind::relay : net::hello::Kind::direct, src, l, dst}, opt_.token);
  if (!io_exact(fd, h.data(), h.size(), true, deadline)) {
    ::close(fd);
    throw BootstrapError("tcp transport: " + what + ": handshake failed");
  }
  return {fd, std::move(name)};
}

void TcpTransport::connect_all(const std::vector<std::string>& endpoints,
                               const std::vector<bool>& same_node,
                               std::chrono::milliseconds timeout, const TcpFabric* f) {
  auto deadline = Clock::now() + timeout;
  const auto lanes = static_cast<std::size_t>(opt_.lanes);
  const int me_node = f ? f->node_of[static_cast<std::size_t>(rank_)] : -1;
  auto mapped = [&](int q) { return f != nullptr && !same_node[static_cast<std::size_t>(q)]; };
  // Connections to a peer: SPARK_TCP_LANES, and at least one per serving lane pair (direct).
  auto conns_for = [&](int q) -> std::size_t {
    if (!mapped(q)) return lanes;
    const auto& r = f->map.route(me_node, f->node_of[static_cast<std::size_t>(q)]);
    return r.kind == fabric::Route::Kind::direct ? std::max(lanes, r.lanes.size()) : lanes;
  };
  // This node's end of connection l with peer q (either side): the lane toward the first
  // hop, named as hop_name does.
  auto conn_name = [&](int q, int l) -> std::string {
    if (!mapped(q)) return {};
    auto path = q < rank_ ? relay_path(*f, rank_, q) : relay_path(*f, q, rank_);
    if (path.empty()) return hop_name(*f, me_node, q, false, l);
    return hop_name(*f, me_node, q < rank_ ? path.front() : path.back(), true, l);
  };
  auto conn_via = [&](int q) -> std::string {
    if (!mapped(q)) return {};
    auto path = q < rank_ ? relay_path(*f, rank_, q) : relay_path(*f, q, rank_);
    if (path.empty()) return {};
    return hop_detail(*f, q < rank_ ? path.front() : path.back(), true);
  };
  for (int q : peer_ranks_) {
    peers_[static_cast<std::size_t>(q)] = std::make_unique<Peer>();
    peers_[static_cast<std::size_t>(q)]->lanes.resize(conns_for(q));
  }
  // Connections this rank relays: every pair (x > y) whose path passes this node's relay.
  std::size_t relay_expected = 0;
  if (f != nullptr && f->speaker[static_cast<std::size_t>(me_node)] == rank_) {
    const int n = static_cast<int>(f->node_of.size());
    for (int x = 0; x < n; ++x)
      for (int y = 0; y < x; ++y)
        for (int hop : relay_path(*f, x, y))
          if (hop == rank_) relay_expected += lanes;
  }
  std::vector<RelayPipe> pipes;
  // Lower ranks listen, higher ranks connect: connect() completes through the listen backlog,
  // so every rank can connect first and accept afterwards without deadlock.
  std::size_t expected = 0;
  for (int q : peer_ranks_) {
    if (q > rank_) {
      expected += peer(q).lanes.size();
      continue;
    }
    if (mapped(q)) {
      for (std::size_t l = 0; l < peer(q).lanes.size(); ++l) {
        auto [fd, name] = open_hop(*f, rank_, q, static_cast<int>(l), deadline);
        setup_conn(peer(q).lanes[l], fd, static_cast<int>(l), std::move(name), conn_via(q));
      }
      continue;
    }
    const std::string& ep = endpoints[static_cast<std::size_t>(q)];
    auto semi = ep.rfind(';');
    if (semi == std::string::npos)
      throw BootstrapError("tcp transport: malformed endpoint '" + ep + "' of rank " +
                           std::to_string(q));
    int port = std::stoi(ep.substr(semi + 1));
    std::vector<std::string> ips;
    for (std::size_t pos = 0; pos < semi;) {
      auto comma = std::min(ep.find(',', pos), semi);
      ips.push_back(ep.substr(pos, comma - pos));
      pos = comma + 1;
    }
    if (!data_lanes_.empty()) {
      // The peer's address on a subnet of one of our lanes goes first: its direct cable.
      std::stable_partition(ips.begin(), ips.end(), [&](const std::string& ip) {
        try {
          fabric::Lane peer{"", 0, fabric::parse_ipv4(ip, "peer address"), 32};
          for (const auto& l : data_lanes_) {
            peer.prefix = l.prefix;
            if (fabric::same_subnet(l, peer)) return true;
          }
        } catch (const ConfigError&) {
        }
        return false;
      });
    }
    if (same_node[static_cast<std::size_t>(q)]) {
      auto it = std::find(ips.begin(), ips.end(), "127.0.0.1");
      if (it != ips.end()) std::rotate(ips.begin(), it, it + 1);
    } else {
      std::erase(ips, "127.0.0.1");
      ips.emplace_back("127.0.0.1");  // last resort (e.g. SPARK_HOST differs, same machine)
    }
    for (std::size_t l = 0; l < lanes; ++l) {
      std::string why;
      int fd = -1;
      // Rounds over the peer's addresses, 3 s each, until the deadline while one of them only
      // timed out: on a lossy link a SYN and its first retry (1 s later) can both be lost
      // (20 % loss: about 1 connection in 8), and giving up after one round failed the
      // wire-up with time left. An address that refuses ends the search.
      for (bool timed_out = true; fd < 0 && timed_out && Clock::now() < deadline;) {
        timed_out = false;
        why.clear();
        for (const auto& ip : ips) {
          std::string failed;
          auto slice = std::min(deadline, Clock::now() + std::chrono::seconds(3));
          fd = connect_to(ip, port, slice, &failed);
          if (fd >= 0) break;
          timed_out = timed_out || failed.starts_with("no connection to");
          why += (why.empty() ? "" : "; ") + failed;
        }
      }
      if (fd < 0)
        throw BootstrapError(
            "tcp transport: rank " + std::to_string(rank_) + " cannot connect to rank " +
            std::to_string(q) + " (" + ep + "): " + why +
            "; check firewalls or set SPARK_TCP_ADDR to an address peers can reach");
      auto h =
          net::hello::encode({net::hello::Kind::direct, rank_, static_cast<int>(l), q}, opt_.token);
      if (!io_exact(fd, h.data(), h.size(), true, deadline)) {
        ::close(fd);
        throw BootstrapError("tcp transport: handshake with rank " + std::to_string(q) + " failed");
      }
      setup_conn(peer(q).lanes[l], fd, static_cast<int>(l));
    }
  }
  auto close_pipes = [&] {
    for (auto& p : pipes)
      for (int fd : {p.a_fd, p.b_fd}) ::close(fd);
  };
  // Accepted connections wait for their hello side by side (net/hello_exchange.hpp).
  const int size = static_cast<int>(peers_.size());
  net::hello::Waiting waiting(opt_.token, size, "tcp", opt_.log_dropped);
  while (expected + relay_expected > 0) {
    std::vector<pollfd> pfds{{listener_->fd(), POLLIN, 0}};
    const auto wake = waiting.watch(pfds, deadline);
    const int ready = ::poll(pfds.data(), pfds.size(), remaining_ms(wake));
    if (ready < 0 && errno != EINTR)
      throw BootstrapError(std::string("tcp transport: poll: ") + std::strerror(errno));
    if (ready <= 0 && Clock::now() >= deadline) {
      std::string missing;
      for (int q : peer_ranks_)
        if (q > rank_)
          for (const auto& c : peer(q).lanes)
            if (c.fd < 0) {
              missing += (missing.empty() ? "" : ", ") + std::to_string(q);
              break;
            }
      close_pipes();
      throw BootstrapError(
          "tcp transport: rank " + std::to_string(rank_) +
          " timed out waiting for connections from rank(s) " + (missing.empty() ? "-" : missing) +
          (relay_expected > 0 ? " and " + std::to_string(relay_expected) + " connection(s) to relay"
                              : std::string()));
    }
    // Hellos that arrived (or never will): each is taken, or dropped with its reason.
    auto hellos = waiting.take(pfds, 1);
    if ((pfds[0].revents & POLLIN) != 0) waiting.accept_from(listener_->fd());
    for (auto& greeted : hellos) {
      const net::hello::Hello& h = greeted.hello;
      set_nonblocking(greeted.fd.get(), false);
      const int fd = greeted.fd.release();
      if (h.kind == net::hello::Kind::relay && relay_expected > 0 && h.dst != rank_ &&
          h.rank != rank_ && h.lane < opt_.lanes &&
          f->node_of[static_cast<std::size_t>(h.rank)] != me_node &&
          f->node_of[static_cast<std::size_t>(h.dst)] != me_node) {
        RelayPipe p;
        p.a_fd = fd;
        p.src = h.rank;
        p.dst = h.dst;
        // This node's lane the connection arrived on (its local address).
        sockaddr_in la{};
        socklen_t len = sizeof la;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&la), &len) == 0)
          for (const auto& l : f->lanes[static_cast<std::size_t>(me_node)])
            if (l.ipv4 == ntohl(la.sin_addr.s_addr)) p.a_lane = "tcp:" + l.name;
        try {
          auto [out, name] = open_hop(*f, h.rank, h.dst, h.lane, deadline);
          p.b_fd = out;
          p.b_lane = std::move(name);
          // The next hop when it is another relay (multi-hop routes): its host for the record.
          const auto path = relay_path(*f, h.rank, h.dst);
          const auto me_at = std::find(path.begin(), path.end(), rank_);
          if (me_at != path.end() && me_at + 1 != path.end()) {
            p.b_next = *(me_at + 1);
            p.b_next_host =
                f->hosts[static_cast<std::size_t>(f->node_of[static_cast<std::size_t>(p.b_next)])];
          }
          if (me_at != path.end() && me_at != path.begin()) {
            p.a_next = *(me_at - 1);
            p.a_next_host =
                f->hosts[static_cast<std::size_t>(f->node_of[static_cast<std::size_t>(p.a_next)])];
            if (p.a_lane.rfind("tcp:", 0) == 0)
              p.a_lane = relayed_lane_name(p.a_next, p.a_lane.substr(4));
          }
        } catch (...) {
          ::close(fd);
          close_pipes();
          throw;
        }
        pipes.push_back(std::move(p));
        --relay_expected;
        continue;
      }
      if (h.kind != net::hello::Kind::direct || h.dst != rank_ || h.rank <= rank_ ||
          !peers_[static_cast<std::size_t>(h.rank)] ||
          static_cast<std::size_t>(h.lane) >= peer(h.rank).lanes.size() ||
          peer(h.rank).lanes[static_cast<std::size_t>(h.lane)].fd >= 0) {
        waiting.drop(fd, "rank " + std::to_string(h.rank), "a duplicate or unexpected hello");
        continue;
      }
      setup_conn(peer(h.rank).lanes[static_cast<std::size_t>(h.lane)], fd, h.lane,
                 conn_name(h.rank, h.lane), conn_via(h.rank));
      --expected;
    }
  }
  waiting.drop_all("wire-up ended before its hello");
  listener_.reset();
  if (!pipes.empty())
    relay_ = std::make_unique<TcpRelay>(
        rank_, f->hosts[static_cast<std::size_t>(me_node)], std::move(pipes),
        std::chrono::milliseconds(opt_.timeout_ms), on_relay_failure_, 256 * 1024, relay_timeout_);
}

const TcpTransport::Conn& TcpTransport::next_conn(int q, WaitKind kind) const {
  const Peer& p = *peers_[static_cast<std::size_t>(q)];
  return p.lanes[kind == WaitKind::data ? p.rx_lane : p.tx_lane];
}

std::string TcpTransport::lane_name(int q, WaitKind kind) const {
  const Conn& c = next_conn(q, kind);
  return c.name.empty() ? "tcp:" + std::to_string(c.lane) : c.name;
}

std::vector<std::string> TcpTransport::lane_names(int q) const {
  std::vector<std::string> names;
  for (const Conn& c : peers_[static_cast<std::size_t>(q)]->lanes)
    names.push_back(c.name.empty() ? "tcp:" + std::to_string(c.lane) : c.name);
  return names;
}

std::string TcpTransport::lane_detail(int q, WaitKind kind) const {
  return next_conn(q, kind).via;
}

void TcpTransport::close_connection(int q, int connection) {
  Conn& c = peer(q).lanes.at(static_cast<std::size_t>(connection));
  ::shutdown(c.fd, SHUT_RDWR);
  mark_closed(c, "closed by this rank");
}

void TcpTransport::mark_closed(Conn& c, const std::string& why) {
  if (!c.closed) {
    c.closed = true;
    c.why = why;
  }
}

void TcpTransport::flush(Conn& c) {
  if (left_) c.queue.clear();  // nothing more goes out (leave); not a close by the peer
  while (!c.queue.empty() && !c.closed) {
    Frame& f = c.queue.front();
    iovec iov[2];
    int n = 0;
    std::size_t total = sizeof(MsgHeader) + ((f.header.kind & 0xff) == kData ? f.header.bytes : 0);
    if (f.done < sizeof(MsgHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&f.header) + f.done, sizeof(MsgHeader) - f.done};
      if (total > sizeof(MsgHeader))
        iov[n++] = {const_cast<std::byte*>(f.data), total - sizeof(MsgHeader)};
    } else {
      iov[n++] = {const_cast<std::byte*>(f.data) + (f.done - sizeof(MsgHeader)), total - f.done};
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<std::size_t>(n);
    ssize_t r = ::sendmsg(c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      mark_closed(c, std::string("send failed: ") + std::strerror(errno));
      return;
    }
    f.done += static_cast<std::size_t>(r);
    if (f.done < total) return;
    c.queue.pop_front();
  }
}

std::chrono::nanoseconds TcpTransport::lane_busy(int q, std::size_t lane) const {
  const auto& lanes = peers_[static_cast<std::size_t>(q)]->lanes;
  return lane < lanes.size() ? tcp_busy_time(lanes[lane].fd) : std::chrono::nanoseconds{};
}

void TcpTransport::read_some(Conn& c) {
  // At a frame's start one scatter read takes its header into the connection's buffer and its
  // payload straight into its slot: one system call and no copy per message (a read of a
  // buffer's worth and a copy into the slot cost a 43 KiB frame of a 128 KiB allreduce a second
  // recv and a 16 KiB copy). The rest of a large payload goes straight from the socket into its
  // slot. A short read means the socket is drained for now.
  while (!c.closed) {
    if (c.rx_pos == c.rx_end) {
      const std::size_t header_left =
          c.rx_got < sizeof(MsgHeader) ? sizeof(MsgHeader) - c.rx_got : 0;
      const std::size_t payload_left =
          header_left == 0 ? sizeof(MsgHeader) + c.rx_header.bytes - c.rx_got : 0;
      std::byte* const payload = slot_at(c, c.rx_filled) + kSlotHeader;
      const bool slot_free = c.rx_filled - c.rx_consumed < opt_.slots;
      // Where the bytes go: both (a frame's start: header to the buffer, payload to its slot;
      // bytes past a shorter frame move to the buffer once its header is read, take_ahead),
      // the slot (the rest of a large payload), or the buffer (the rest of a header, or
      // everything while the mailbox is full: credit frames).
      enum class Into { buffer, slot, scatter } into = Into::buffer;
      iovec iov[2];
      std::size_t parts = 1;
      if (header_left == sizeof(MsgHeader) && slot_free) {
        into = Into::scatter;
        iov[0] = {c.rx_buf.get(), sizeof(MsgHeader)};
        iov[1] = {payload, opt_.slot_bytes};
        parts = 2;
      } else if (payload_left >= kRxBuffer) {
        if (!slot_free) return;  // cannot happen with credits
        into = Into::slot;
        iov[0] = {payload + (c.rx_got - sizeof(MsgHeader)), payload_left};
      } else {
        iov[0] = {c.rx_buf.get(), header_left > 0 && c.rx_whole_piece ? header_left : kRxBuffer};
      }
      msghdr mh{};
      mh.msg_iov = iov;
      mh.msg_iovlen = parts;
      const ssize_t r = ::recvmsg(c.fd, &mh, MSG_DONTWAIT);
      if (r == 0) {
        mark_closed(c, "connection closed by the peer");
        return;
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
        mark_closed(c, std::string("receive failed: ") + std::strerror(errno));
        return;
      }
      const auto got = static_cast<std::size_t>(r);
      c.rx_drained = got < iov[0].iov_len + (parts == 2 ? iov[1].iov_len : 0);
      if (into == Into::slot) {
        c.rx_got += got;
      } else {
        c.rx_pos = 0;
        c.rx_end = into == Into::scatter ? std::min(got, sizeof(MsgHeader)) : got;
        c.rx_ahead = got - c.rx_end;
      }
    } else if (c.rx_got < sizeof(MsgHeader)) {
      const std::size_t n = std::min(sizeof(MsgHeader) - c.rx_got, c.rx_end - c.rx_pos);
      std::memcpy(reinterpret_cast<std::byte*>(&c.rx_header) + c.rx_got, c.rx_buf.get() + c.rx_pos,
                  n);
      c.rx_pos += n;
      c.rx_got += n;
      if (c.rx_got == sizeof(MsgHeader)) {
        const std::uint32_t type = c.rx_header.kind & 0xff;
        c.credits += c.rx_header.kind >> 8;
        if (type == kCredit) {
          take_ahead(c, 0);
          c.rx_got = 0;
          continue;
        }
        if (type != kData || c.rx_header.bytes > opt_.slot_bytes) {
          mark_closed(c, "protocol error (bad frame)");
          return;
        }
        take_ahead(c, c.rx_header.bytes);
      }
    } else {
      if (c.rx_filled - c.rx_consumed >= opt_.slots) return;  // cannot happen with credits
      std::byte* slot = slot_at(c, c.rx_filled);
      const std::size_t off = c.rx_got - sizeof(MsgHeader);
      const std::size_t n = std::min<std::size_t>(c.rx_header.bytes - off, c.rx_end - c.rx_pos);
      std::memcpy(slot + kSlotHeader + off, c.rx_buf.get() + c.rx_pos, n);
      c.rx_pos += n;
      c.rx_got += n;
    }
    if (c.rx_got >= sizeof(MsgHeader) && c.rx_got == sizeof(MsgHeader) + c.rx_header.bytes) {
      std::memcpy(slot_at(c, c.rx_filled), &c.rx_header, sizeof(MsgHeader));
      c.rx_whole_piece = c.rx_header.bytes >= opt_.slot_bytes;
      ++c.rx_filled;
      c.rx_got = 0;
    }
    if (c.rx_pos == c.rx_end && c.rx_drained) {
      c.rx_drained = false;  // the next call asks the socket again
      return;
    }
  }
}

std::byte* TcpTransport::slot_at(Conn& c, std::uint64_t frame) const noexcept {
  return c.rx_slots.get() + (frame % opt_.slots) * (kSlotHeader + opt_.slot_bytes);
}

void TcpTransport::take_ahead(Conn& c, std::size_t payload) {
  if (c.rx_ahead == 0) return;
  // The scatter read put these bytes where the next slot's payload begins: the frame's own
  // payload is in place; what follows it belongs to the next frames and goes to the buffer
  // (empty now: the header was its last bytes).
  std::byte* const at = slot_at(c, c.rx_filled) + kSlotHeader;
  const std::size_t mine = std::min(c.rx_ahead, payload);
  c.rx_got += mine;
  const std::size_t rest = c.rx_ahead - mine;
  c.rx_ahead = 0;
  if (rest > 0) {
    std::memcpy(c.rx_buf.get(), at + payload, rest);
    c.rx_pos = 0;
    c.rx_end = rest;
  }
}

void TcpTransport::owe_credits(Conn& c, bool all) {
  if (c.credits_owed == 0 || (!all && c.credits_owed < opt_.slots / 2)) return;
  Frame f;
  f.header.kind = kCredit | (c.credits_owed << 8);
  c.credits_owed = 0;
  c.queue.push_back(f);
  flush(c);
}

bool TcpTransport::can_send(int q) {
  Peer& p = peer(q);
  Conn& c = p.lanes[p.tx_lane];
  if (c.credits == 0) read_some(c);
  return c.credits > 0 || c.closed;  // closed: send() is a no-op, the wait point reports it
}

void TcpTransport::send(int q, const MsgHeader& header, const void* data) {
  Peer& p = peer(q);
  Conn& c = p.lanes[p.tx_lane];
  p.tx_lane = next_lane(p.tx_lane, header.bytes, p.lanes.size());
  if (c.closed || left_) return;
  Frame f;
  f.header = header;
  f.header.kind = kData | (c.credits_owed << 8);  // piggyback credits we owe
  c.credits_owed = 0;
  std::byte* staging = c.tx_slots.get() + (c.tx_sent % opt_.slots) * opt_.slot_bytes;
  ++c.tx_sent;
  --c.credits;
  f.data = staging;
  if (c.queue.empty()) {
    // Straight from the caller's buffer; only what the socket does not take now is copied
    // to staging (the caller may reuse its buffer when send() returns).
    iovec iov[2] = {{&f.header, sizeof(MsgHeader)}, {const_cast<void*>(data), header.bytes}};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = header.bytes > 0 ? 2 : 1;
    ssize_t r = ::sendmsg(c.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      mark_closed(c, std::string("send failed: ") + std::strerror(errno));
      return;
    }
    f.done = r > 0 ? static_cast<std::size_t>(r) : 0;
    if (f.done == sizeof(MsgHeader) + header.bytes) return;
  }
  // Copy the part not yet written (at its own offset, so flush() finds it there).
  const std::size_t from = f.done > sizeof(MsgHeader) ? f.done - sizeof(MsgHeader) : 0;
  if (header.bytes > from)
    std::memcpy(staging + from, static_cast<const std::byte*>(data) + from, header.bytes - from);
  c.queue.push_back(f);
  flush(c);
}

bool TcpTransport::send_idle(int q) {
  for (auto& c : peer(q).lanes) {
    if (!c.queue.empty()) flush(c);
    if (!c.queue.empty() && !c.closed) return false;
  }
  return true;
}

RecvView TcpTransport::peek(int q) {
  Peer& p = peer(q);
  Conn& c = p.lanes[p.rx_lane];
  if (c.rx_filled == c.rx_consumed) {
    read_some(c);
    if (c.rx_filled == c.rx_consumed) return {};
  }
  std::byte* slot = slot_at(c, c.rx_consumed);
  return {reinterpret_cast<const MsgHeader*>(slot), slot + kSlotHeader};
}

void TcpTransport::release(int q) {
  Peer& p = peer(q);
  Conn& c = p.lanes[p.rx_lane];
  const auto* header = reinterpret_cast<const MsgHeader*>(slot_at(c, c.rx_consumed));
  p.rx_lane = next_lane(p.rx_lane, header->bytes, p.lanes.size());
  ++c.rx_consumed;
  ++c.credits_owed;
}

void TcpTransport::progress() {
  // The wait point calls this on every poll of a spin, and its ready() check reads the one
  // connection the wait is on (peek, can_send); reading every other connection on every poll
  // too was a recvmsg per connection per poll that found nothing (3 netns hosts, 1 KiB
  // allreduce: 17 recvmsg per call per rank, 2 of them with data), CPU that ranks sharing
  // cores need. So the others are read on every kReadAllEvery-th call, and on the first call
  // after a block (whichever socket woke the ppoll is read then, not polled again at once).
  // What they hold waits in the socket meanwhile; queued sends and owed credits still move on
  // every call.
  const bool read_all = read_all_next_ || ++progress_calls_ % kReadAllEvery == 0;
  read_all_next_ = false;
  for (Conn* c : all_) {
    owe_credits(*c, false);
    if (!c->queue.empty()) flush(*c);
    if (read_all) read_some(*c);
  }
}

bool TcpTransport::has_pending() const noexcept {
  return std::any_of(all_.begin(), all_.end(),
                     [](const Conn* c) { return !c->queue.empty() && !c->closed; });
}

void TcpTransport::block(int, WaitKind, std::chrono::microseconds max) {
  // About to sleep: hand back every credit we owe, or a sender waiting for one would stall.
  std::vector<pollfd> fds;
  fds.reserve(all_.size());
  for (Conn* c : all_) {
    // Hand back owed credits only when the peer may have run out of them: it has sent a full
    // mailbox that we have not credited yet (frames still on their way wake this ppoll, and
    // the next block() looks again). Otherwise they ride on our next data frame: a credit
    // frame here cost a system call and woke a blocked peer for nothing, once per message.
    // A closed connection is left out (it would wake the ppoll at once, for good): the wait
    // point asks wait_state whether the one it waits on closed.
    if (c->closed) continue;
    if (c->credits_owed > 0 &&
        c->rx_filled - (c->rx_consumed - c->credits_owed) + (c->rx_got > 0 ? 1 : 0) >= opt_.slots)
      owe_credits(*c, true);
    fds.push_back({c->fd, static_cast<short>(POLLIN | (c->queue.empty() ? 0 : POLLOUT)), 0});
  }
  timespec ts{static_cast<time_t>(max.count() / 1000000),
              static_cast<long>((max.count() % 1000000) * 1000)};
  ::ppoll(fds.data(), fds.size(), &ts, nullptr);
  read_all_next_ = true;
}

PeerState TcpTransport::conn_state(const Conn& c, int q, std::string* detail) {
  if (!c.closed) return PeerState::ok;
  if (detail != nullptr)
    *detail = c.why + " (rank " + std::to_string(q) + ", connection " + std::to_string(c.lane) +
              (c.name.empty() ? "" : ", lane " + c.name) + (c.via.empty() ? "" : ", " + c.via) +
              ")";
  return PeerState::closed;
}

void TcpTransport::leave() noexcept {
  // The write side only: the peers read the end, and this rank still reads theirs (its own
  // state stays what the peers did, e.g. for the single copy's wait after its notices).
  left_ = true;
  for (Conn* c : all_)
    if (c->fd >= 0) ::shutdown(c->fd, SHUT_WR);
}

PeerState TcpTransport::peer_state(int q, std::string* detail) {
  for (const Conn& c : peer(q).lanes)
    if (c.closed) return conn_state(c, q, detail);
  return PeerState::ok;
}

PeerState TcpTransport::wait_state(int q, WaitKind kind, std::string* detail) {
  return kind == WaitKind::send_done ? peer_state(q, detail)
                                     : conn_state(next_conn(q, kind), q, detail);
}

}  // namespace spark::transport
