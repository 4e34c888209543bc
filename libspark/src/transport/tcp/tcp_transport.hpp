// TCP transport: one or more connections ("lanes") per peer; message i to a peer travels on
// lane i % lanes, so large transfers (cut into slot-sized pieces) are striped. The receiver's
// progress engine (driven by the caller's wait loop, no extra thread: 2 cores) reads each
// frame straight into a slot of the per-lane mailbox; releasing a slot returns a credit,
// piggybacked on the next data frame or sent as a small credit frame.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "transport/transport.hpp"

namespace spark::transport {

struct TcpOptions {
  int lanes = 2;
  std::size_t slots = 8;
  std::size_t slot_bytes = 256 * 1024;
  std::optional<std::string> addr;  ///< SPARK_TCP_ADDR: listen on / publish this IPv4 only
  /// SPARK_DATA_NET: publish only interfaces in these subnets, and connect to each peer first
  /// through the address that shares a subnet with one of ours (its cable: per-peer lanes).
  std::string data_net;
};

class TcpTransport final : public Transport {
 public:
  /// Opens the listening socket. `peers`: the ranks reached over tcp.
  TcpTransport(int rank, int size, std::vector<int> peers, TcpOptions options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  /// "ip1,ip2,...;port": what peers connect to.
  std::string endpoint() const;
  /// Connects to lower-ranked peers, accepts higher-ranked ones. `endpoints[r]` is rank r's
  /// endpoint (empty for ranks not in `peers`); `same_node[r]` prefers loopback.
  void connect_all(const std::vector<std::string>& endpoints, const std::vector<bool>& same_node,
                   std::chrono::milliseconds timeout);

  std::string_view name() const noexcept override { return "tcp"; }
  std::size_t slot_bytes() const noexcept override { return opt_.slot_bytes; }
  std::string lane_name(int peer, WaitKind kind) const override;
  bool can_send(int peer) override;
  void send(int peer, const MsgHeader& header, const void* data) override;
  bool send_idle(int peer) override;
  RecvView peek(int peer) override;
  void release(int peer) override;
  void progress() override;
  bool has_pending() const noexcept override;
  void block(int peer, WaitKind kind, std::chrono::microseconds max) override;
  PeerState peer_state(int peer, std::string* detail) override;

 private:
  struct Frame {
    MsgHeader header;
    const std::byte* data = nullptr;
    std::size_t done = 0;  ///< bytes of header+payload already written
  };
  struct Conn {
    int fd = -1;
    int lane = 0;
    // receive side: mailbox of `slots` slots
    std::unique_ptr<std::byte[]> rx_slots;
    std::uint64_t rx_filled = 0, rx_consumed = 0;
    MsgHeader rx_header{};
    std::size_t rx_got = 0;  ///< bytes of the current frame read so far
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
    std::uint64_t tx_count = 0, rx_count = 0;
  };
  Peer& peer(int rank) { return *peers_[static_cast<std::size_t>(rank)]; }
  void flush(Conn& c);
  void read_some(Conn& c);
  void owe_credits(Conn& c, bool all);
  void mark_closed(Conn& c, const std::string& why);
  void setup_conn(Conn& c, int fd, int lane);

  int rank_;
  std::vector<int> peer_ranks_;
  TcpOptions opt_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<std::string> addrs_;
  std::vector<fabric::Lane> data_lanes_;  ///< SPARK_DATA_NET lanes (empty: not set)
  std::vector<std::unique_ptr<Peer>> peers_;  ///< indexed by global rank
  std::vector<Conn*> all_;
};

}  // namespace spark::transport
