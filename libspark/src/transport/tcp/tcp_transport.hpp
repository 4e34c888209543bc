// TCP transport: one or more connections ("lanes") per peer. A message of a whole piece
// (slot_bytes) moves the next message to the peer onto the next lane, any other stays on its
// lane: large transfers (cut into slot-sized pieces) are striped, small messages keep to one
// connection (next_lane; both ends apply it to the same headers). The receiver's
// progress engine (driven by the caller's wait loop, no extra thread: 2 cores) reads each
// frame straight into a slot of the per-lane mailbox; releasing a slot returns a credit,
// piggybacked on the next data frame or sent as a small credit frame.
//
// With a fabric map (TcpFabric, docs/fabric.md: ranks on several hosts and SPARK_DATA_NET
// set) each peer is reached over the lanes that serve it: connection l to a peer uses the
// l-th serving lane pair (round robin), its socket bound to the local lane's address. A peer
// with no lane is reached through the neighbour the map names (Route::via): the connection
// goes to that node's first rank, whose relay thread (tcp_relay.hpp) forwards it byte for
// byte, hop by hop, so frames and credits are the same as on a direct connection.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "fabric/probe_protocol.hpp"
#include "net/hello.hpp"
#include "net/socket.hpp"
#include "transport/tcp/tcp_relay.hpp"
#include "transport/transport.hpp"

namespace spark::transport {

struct TcpOptions {
  int lanes = 2;
  std::size_t slots = 32;              ///< CommOptions::tcp_slots
  std::size_t slot_bytes = 64 * 1024;  ///< CommOptions::tcp_slot_bytes (why: there)
  std::optional<std::string> addr;     ///< SPARK_TCP_ADDR: listen on / publish this IPv4 only
  /// SPARK_DATA_NET: publish only interfaces in these subnets, and connect to each peer first
  /// through the address that shares a subnet with one of ours (its cable: per-peer lanes).
  std::string data_net;
  /// SPARK_TCP_PORT_RANGE: the listener's and the fabric probe listener's ports (0: ephemeral).
  net::PortRange ports;
  std::uint32_t timeout_ms = 10000;  ///< SPARKNET_ROCE_TIMEOUT_MS: a relay stalled this long fails
  /// The job's token (net/hello.hpp): in every hello sent; a connection without it is dropped.
  net::hello::Token token{};
  /// SPARK_LOG=info (or trace) for tcp: a dropped connection prints one line on stderr.
  bool log_dropped = false;
};

/// What the fabric map tells the transport (built at wire-up, identical on every rank).
struct TcpFabric {
  fabric::FabricMap map;                         ///< node -> node routes
  std::vector<std::string> hosts;                ///< node names (SPARK_HOST)
  std::vector<std::vector<fabric::Lane>> lanes;  ///< every node's data lanes
  std::vector<int> node_of;                      ///< rank -> node
  std::vector<int> speaker;                      ///< node -> its first rank (probes, relays)
  std::vector<int> ports;                        ///< rank -> tcp listening port (0: none)
};

/// Record texts of a relayed lane (FailureRecord::lane holds 31 characters): the compact lane
/// name "tcp:via r<R>/<LANE>" (rank and this node's lane toward the relay always fit: interface
/// names have at most 15 characters) and the detail naming the relaying host in full.
std::string relayed_lane_name(int relay_rank, const std::string& lane);
/// How long the connection had data in flight (the kernel's TCP_INFO busy time); 0 when the
/// kernel does not say (tcp_busy.cpp: <linux/tcp.h>, whose struct clashes with <netinet/tcp.h>).
std::chrono::nanoseconds tcp_busy_time(int fd) noexcept;
std::string relayed_lane_detail(const std::string& relay_host, int relay_rank);

/// Ranks whose relays a connection from `src` to `dst` passes through, in order (empty when
/// their nodes share a lane or are one node). Pure; used by both ends and by tests.
std::vector<int> relay_path(const TcpFabric& fabric, int src, int dst);

/// The map is learnt when ranks span hosts and SPARK_DATA_NET names the lanes (and
/// SPARK_TCP_ADDR is unset; never for the wire-up's fallback instance). Every rank computes
/// this alike, so all of them take the map's extra fence or none (docs/fabric.md).
bool learns_fabric_map(const Setup& s);

class TcpTransport final : public Transport {
 public:
  /// Opens the listening socket. `peers`: the ranks reached over tcp.
  TcpTransport(int rank, int size, std::vector<int> peers, TcpOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  /// "ip1,ip2,...;port": what peers connect to.
  std::string endpoint() const override;
  /// Learns the fabric map when it applies (tcp_setup.cpp), then connect_all.
  void connect(const Setup& setup, const std::vector<std::string>& endpoints) override;
  std::vector<int> direct_ring() const override { return ring_; }
  /// This node's data lanes (SPARK_DATA_NET set; empty otherwise), as published for the map.
  const std::vector<fabric::Lane>& data_lanes() const noexcept { return data_lanes_; }
  /// The listening port.
  int port() const noexcept { return port_; }
  /// On a node's speaker when the fabric map is learnt (tcp_setup.cpp): opens the socket where
  /// node `me` (of `nodes`) is probed and answers probes on it until the map is known.
  /// Returns the port to publish.
  int answer_probes(int nodes, int me);
  /// Where a relay stall is reported (called from the relay thread; must not throw).
  void set_relay_failure_handler(TcpRelay::OnFailure handler) {
    on_relay_failure_ = std::move(handler);
  }
  /// Where the relay reads the current timeout (the communicator's, so set_timeout_ms applies).
  void set_relay_timeout_source(TcpRelay::TimeoutSource source) {
    relay_timeout_ = std::move(source);
  }

  /// Connects to lower-ranked peers, accepts higher-ranked ones. `endpoints[r]` is rank r's
  /// endpoint (empty for ranks not in `peers`); `same_node[r]` prefers loopback. With
  /// `fabric`, peers on other nodes are reached over their serving lanes or through relays,
  /// and this rank accepts (and then forwards) the connections it relays for others.
  void connect_all(const std::vector<std::string>& endpoints, const std::vector<bool>& same_node,
                   std::chrono::milliseconds timeout, const TcpFabric* fabric = nullptr);
  /// Bytes this rank's relay forwarded (0 when it relays for nobody).
  std::uint64_t relayed_bytes() const noexcept { return relay_ ? relay_->forwarded() : 0; }
  /// Closes one connection to `peer` (both directions): what a peer's exit looks like to a
  /// rank while the close on that connection has arrived and another's last message has not;
  /// for tests.
  void close_connection(int peer, int connection);

  std::string_view name() const noexcept override { return "tcp"; }
  std::size_t slot_bytes() const noexcept override { return opt_.slot_bytes; }
  std::string lane_name(int peer, WaitKind kind) const override;
  std::string lane_detail(int peer, WaitKind kind) const override;
  std::vector<std::string> lane_names(int peer) const override;
  std::chrono::nanoseconds lane_busy(int peer, std::size_t lane) const override;
  std::size_t lane_index(int peer, WaitKind kind) const noexcept override {
    const Peer& p = *peers_[static_cast<std::size_t>(peer)];
    return kind == WaitKind::data ? p.rx_lane : p.tx_lane;
  }
  bool can_send(int peer) override;
  void send(int peer, const MsgHeader& header, const void* data) override;
  bool send_idle(int peer) override;
  RecvView peek(int peer) override;
  void release(int peer) override;
  void progress() override;
  bool has_pending() const noexcept override;
  void block(int peer, WaitKind kind, std::chrono::microseconds max) override;
  PeerState peer_state(int peer, std::string* detail) override;
  /// Shuts the write side of every own connection: the peers read its end at once.
  void leave() noexcept override;
  /// data: the connection the next message comes on; credit: the one the next message goes
  /// on; send_done: any (peer_state).
  PeerState wait_state(int peer, WaitKind kind, std::string* detail) override;

 private:
  struct Frame {
    MsgHeader header;
    const std::byte* data = nullptr;
    std::size_t done = 0;  ///< bytes of header+payload already written
  };
  struct Conn {
    int fd = -1;
    int lane = 0;
    std::string name;  ///< lane name in records ("" = "tcp:<lane>")
    std::string via;   ///< relayed: "relayed by rank R on host H" (the record's detail)
    // receive side: mailbox of `slots` slots
    std::unique_ptr<std::byte[]> rx_slots;
    std::uint64_t rx_filled = 0, rx_consumed = 0;
    MsgHeader rx_header{};
    std::size_t rx_got = 0;               ///< bytes of the current frame read so far
    std::unique_ptr<std::byte[]> rx_buf;  ///< bytes read but not yet parsed: [rx_pos, rx_end)
    std::size_t rx_pos = 0, rx_end = 0;
    bool rx_drained = false;  ///< the last recv was short: the socket had no more for now
    /// The last frame was a whole piece: when a read ends inside the next header, only the
    /// header's rest is read (its large payload then goes straight into the slot), not a
    /// buffer's worth of both and a copy of the payload part.
    bool rx_whole_piece = false;
    /// Bytes a scatter read (header to the buffer, payload to the next slot) put past the
    /// header, not yet accounted: the frame's payload, and maybe the next frames' bytes.
    std::size_t rx_ahead = 0;
    std::uint32_t credits_owed = 0;
    // send side
    std::unique_ptr<std::byte[]> tx_slots;  ///< staging; slot i%slots is free when credited
    std::uint64_t tx_sent = 0;
    std::uint32_t credits = 0;
    std::deque<Frame> queue;
    bool closed = false;
    std::string why;
  };
  struct Peer {
    std::vector<Conn> lanes;
    std::size_t tx_lane = 0, rx_lane = 0;  ///< of the next message to / from the peer
  };
  Peer& peer(int rank) { return *peers_[static_cast<std::size_t>(rank)]; }
  /// The lane of the message after one of `bytes` on `lane`: the next lane after a whole
  /// piece, the same after a smaller message. Striping small messages cost a 3-host 1 KiB
  /// allreduce over veth 77-85 us instead of 53 (each connection's socket, wake-up and
  /// acknowledgements paid per message); large ones need it (16 MiB 21.7 vs 57.9 ms on one).
  std::size_t next_lane(std::size_t lane, std::size_t bytes, std::size_t lanes) const noexcept {
    return bytes >= opt_.slot_bytes && lanes > 1 ? (lane + 1) % lanes : lane;
  }
  /// The connection of the next message from `rank` (data) or to it (credit, send_done).
  const Conn& next_conn(int rank, WaitKind kind) const;
  /// ok, or closed with the connection's reason in `detail`.
  static PeerState conn_state(const Conn& c, int rank, std::string* detail);
  void flush(Conn& c);
  void read_some(Conn& c);
  void owe_credits(Conn& c, bool all);
  /// The receive slot of frame number `frame` on `c` (its header area first, kSlotHeader).
  std::byte* slot_at(Conn& c, std::uint64_t frame) const noexcept;
  /// After a scatter read, once the header says the frame's payload size: keeps that much of
  /// rx_ahead in the slot and moves the rest to the buffer.
  void take_ahead(Conn& c, std::size_t payload);
  void mark_closed(Conn& c, const std::string& why);
  void setup_conn(Conn& c, int fd, int lane, std::string name = {}, std::string via = {});
  /// Opens connection `l` from this node toward rank `dst` on behalf of rank `src` (this rank,
  /// or the rank a relay forwards for): direct over the serving lane pair, or to the relay
  /// the map names. Returns the fd (hello sent) and the lane name; throws on failure.
  std::pair<int, std::string> open_hop(const TcpFabric& f, int src, int dst, int l,
                                       std::chrono::steady_clock::time_point deadline);

  int rank_;
  std::vector<int> peer_ranks_;
  TcpOptions opt_;
  std::optional<net::Listener> listener_;                ///< closed once every peer has connected
  std::optional<net::Listener> probe_listener_;          ///< open while the fabric map is learnt
  std::optional<fabric::ProbeAnswerer> probe_answerer_;  ///< answers on it; destroyed first
  int port_ = 0;
  std::vector<std::string> addrs_;
  std::vector<fabric::Lane> data_lanes_;      ///< SPARK_DATA_NET lanes (empty: not set)
  std::vector<std::unique_ptr<Peer>> peers_;  ///< indexed by global rank
  std::vector<Conn*> all_;
  bool left_ = false;  ///< leave(): nothing more is sent
  /// progress() reads every connection on every kReadAllEvery-th call (why: there).
  static constexpr std::uint32_t kReadAllEvery = 8;
  std::uint32_t progress_calls_ = 0;
  bool read_all_next_ = true;  ///< the next progress() reads every connection (after a block)
  TcpRelay::OnFailure on_relay_failure_;
  TcpRelay::TimeoutSource relay_timeout_;
  std::unique_ptr<TcpRelay> relay_;  ///< started when this rank relays for someone
  std::vector<int> ring_;            ///< direct_ring(): set by connect() from the fabric map
};

}  // namespace spark::transport
