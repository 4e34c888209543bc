// RoCE transport: one RC queue pair per peer per lane (an RDMA device, e.g. rocep1s0f0 and
// roceP2p1s0f0 on a Spark), memory registered once at start-up, data moved by RDMA WRITE.
//
// Layout. For every (peer, lane) this rank owns a receive region the peer writes into:
//   slots x [ MsgHeader (40 B) | pad | flag u64 at +56 | payload slot_bytes ]   then
//   credit u64 (how many of *our* messages to that peer it has released on this lane)
// and a send staging area of the same slot layout. Message i to a peer goes on lane
// i % lanes into slot (i / lanes) % slots (transport.hpp). A send posts two WRITEs on the
// lane's QP: [header | payload] from staging, then the 8-byte flag (= per-lane message count),
// so the flag lands after the data (one RC QP executes writes in order). The receiver polls
// the flag in place; release() writes the released count into the sender's credit word.
// Flags and data live in plain pinned host memory that a GB10 GPU can also read in place.
//
// Liveness: RDMA has no "peer closed" signal (a write to a vanished QP only fails after the
// retry budget, and Soft-RoCE may never fail it), so every pair also holds one idle TCP
// connection over the lane-0 network: a dead peer process closes it at once (peer_state ->
// closed), a stopped one does not (its silence is left to the deadline).
//
// Completions: flag and credit writes are signaled; an error completion marks the peer
// failed with "RDMA write to rank P on lane DEV failed: <ibv_wc_status_str>" which the wait
// point turns into the FailureRecord. QP retry timing comes from qp_timeouts(timeout_ms), so
// the verbs layer gives up before the fail-stop deadline (docs/roce.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/socket.hpp"
#include "transport/transport.hpp"
#include "verbs/port.hpp"

namespace spark::transport {

class VerbsRelay;

struct VerbsOptions {
  std::vector<std::string> devices;  ///< lanes; empty = every device whose port 1 is active
  std::size_t slots = 8;
  std::size_t slot_bytes = 256 * 1024;
  std::uint32_t timeout_ms = 10000;  ///< SPARKNET_ROCE_TIMEOUT_MS: sets QP retry timing
  std::optional<int> gid_index;      ///< SPARK_IB_GID_INDEX (unset = from sysfs)
  std::string sysfs_root = std::string(verbs::kSysfsInfiniband);
  int port = 1;
  /// Per rank: indices into `devices` of the links toward that peer, in link order (both ends
  /// list their ends of the same lane pairs in the same order: fabric/roce_lanes.hpp). An
  /// empty entry (or an empty vector): every device, lane i to the peer's lane i.
  std::vector<std::vector<int>> peer_lanes;
  /// Per rank: the rank whose relay carries the links toward that peer (-1 or absent: direct;
  /// fabric/roce_lanes.hpp, verbs_relay.hpp), and that rank's host, for records.
  std::vector<int> peer_via;
  std::vector<std::string> via_host;
  /// A liveness tcp connection per pair (off for a relay's own transport).
  bool liveness = true;
  net::PortRange ports;  ///< SPARK_TCP_PORT_RANGE: the liveness listener's port (0: ephemeral)
  /// SPARK_TRANSPORT=auto: a direct peer whose every link fails the RDMA WRITE probe is given
  /// up (unreachable(); the wire-up reaches it over tcp) instead of failing the wire-up.
  bool fall_back = false;
};

/// One link that failed the RDMA WRITE probe: which peer, which link, why.
struct ProbeFailure {
  int peer = -1;
  int link = -1;
  std::string why;
};

/// Lanes from SPARK_LANES (set by sparkrun from the binding plan), else SPARK_IB_HCA, else
/// every device with an active port; SPARK_IB_GID_INDEX; the QP timing from the timeout.
VerbsOptions verbs_options(const CommOptions& options);

class VerbsTransport final : public Transport {
 public:
  /// Opens the lanes, registers memory, creates the QPs. `peers`: ranks reached over RoCE.
  VerbsTransport(int rank, int size, std::vector<int> peers, VerbsOptions options);
  ~VerbsTransport() override;
  VerbsTransport(const VerbsTransport&) = delete;
  VerbsTransport& operator=(const VerbsTransport&) = delete;

  /// Binary blob to publish through the bootstrap: this rank's endpoint per (peer, lane).
  std::string endpoint() const override;
  /// connect_all (relayed peers: the relay's pair blob in place of the peer's), the relay's
  /// links, then the RDMA WRITE probe (probe_links) and the relay's thread.
  void connect(const Setup& setup, const std::vector<std::string>& endpoints) override;
  /// Connects every QP; `endpoints[r]` is rank r's endpoint() (empty for ranks not in
  /// `peers`). Throws VerbsError for lane-count, slot-layout or MTU mismatches.
  void connect_all(const std::vector<std::string>& endpoints);
  /// For a relay (verbs_relay.hpp): an endpoint blob of `peer_to` = {peer, addressee} pairs,
  /// each peer's links listed as if addressed to the addressee, without a liveness listener.
  std::string endpoint_as(const std::vector<std::pair<int, int>>& peer_to) const;
  /// The blob of both: `peer_to`'s links and the liveness listener's port (-1: none).
  std::string endpoint_blob(const std::vector<std::pair<int, int>>& peer_to,
                            int listener_port) const;
  /// Connects the links toward `peer` from the entries of `blob` addressed to `as_rank`;
  /// returns the blob's liveness port (0: none). connect_all does this for every peer.
  std::uint16_t connect_peer(int peer, const std::string& blob, int as_rank);
  /// The rank relaying toward `peer`, or -1 (direct).
  int via(int peer) const noexcept;
  /// Keeps the relay this rank runs for others (verbs_relay.hpp) alive as long as this
  /// transport; it is drained and stopped first when the transport is destroyed.
  void adopt_relay(std::unique_ptr<VerbsRelay> relay);
  VerbsRelay* relay() const noexcept { return relay_.get(); }
  /// One line per lane: device, GID index and value, path MTU, QP timeout.
  std::string describe() const;

  /// The RDMA probe (after every rank connected): one small signaled RDMA WRITE per link into
  /// the peer's probe word; returns the links whose write did not complete successfully within
  /// `timeout` (a lane counts for a peer only after this succeeded: docs/roce.md).
  std::vector<ProbeFailure> probe(std::chrono::milliseconds timeout);
  /// Stops using link `link` toward `peer` (a failed probe at either end). Throws VerbsError
  /// naming the pair when no link to the peer is left.
  void drop_link(int peer, int link, const std::string& why);
  /// After connect_all: each pair with a liveness connection says "ready" on it (so both ends'
  /// QPs can receive), probes, and exchanges per-link results on it; links failed at either
  /// end are dropped. A failure toward a peer without that connection (relayed) throws. With
  /// fall_back, a direct peer with no link left is forgotten (both ends agree) and listed by
  /// unreachable().
  void probe_links(std::chrono::milliseconds timeout);
  std::vector<std::pair<int, std::string>> unreachable() const override { return unreachable_; }

  std::string_view name() const noexcept override { return "roce"; }
  std::size_t slot_bytes() const noexcept override { return opt_.slot_bytes; }
  std::string lane_name(int peer, WaitKind kind) const override;
  std::vector<std::string> lane_names(int peer) const override;
  std::size_t lane_index(int peer, WaitKind kind) const noexcept override;
  std::string lane_detail(int peer, WaitKind kind) const override;
  bool can_send(int peer) override;
  void send(int peer, const MsgHeader& header, const void* data) override;
  bool send_idle(int peer) override;
  RecvView peek(int peer) override;
  void release(int peer) override;
  void progress() override;
  bool has_pending() const noexcept override;
  void block(int peer, WaitKind kind, std::chrono::microseconds max) override;
  PeerState peer_state(int peer, std::string* detail) override;
  /// A "failed" byte on every liveness connection (its teardown can take long).
  void leave() noexcept override;

 private:
  struct Lane;    // one device: context, PD, CQ, MR, memory
  struct Link {   // one (peer, lane): QP and counters
    int dev = 0;  ///< index into lanes_ (the local RDMA device)
    verbs::QueuePair qp;
    verbs::Endpoint local, remote;
    std::byte* rx = nullptr;  ///< our receive region for this peer (slots + credit word)
    std::byte* tx = nullptr;  ///< our staging slots for this peer
    std::uint64_t* credit_src = nullptr;  ///< registered source of credit writes
    std::uint64_t rx_seen = 0;            ///< messages released on this lane
    std::uint64_t tx_sent = 0;            ///< messages sent on this lane
    int outstanding = 0;                  ///< WRs in the send queue not yet retired (SQ accounting)
    int data_outstanding = 0;             ///< messages whose flag write has not completed
    bool credit_dirty = false;            ///< a credit write is owed (SQ was full)
    int probe = 0;                        ///< RDMA probe: 0 pending, 1 ok, 2 failed
    std::string probe_error;
  };
  struct Peer {
    std::vector<Link> links;  ///< per link (lane pair toward this peer)
    std::vector<int> use;     ///< links that carry data (passed the probe); message i: use[i % n]
    std::uint64_t tx_count = 0, rx_count = 0;
    std::string error;  ///< first error completion, "" while healthy
    int live_fd = -1;   ///< liveness connection (-1: none)
    bool closed = false;
    bool closed_first = false;  ///< the close was the first error (else: a failed write was)
    bool left = false;          ///< it said it failed and left (the 'F' byte, leave())
    bool finished = false;      ///< it sent the goodbye byte: its transport ended cleanly
  };

  std::size_t stride() const noexcept;
  std::size_t region_bytes() const noexcept;
  Peer& peer(int r) { return *peers_[static_cast<std::size_t>(r)]; }
  const Peer& peer(int r) const { return *peers_[static_cast<std::size_t>(r)]; }
  Link& tx_link(Peer& p) {
    return p.links[static_cast<std::size_t>(p.use[p.tx_count % p.use.size()])];
  }
  Link& rx_link(Peer& p) {
    return p.links[static_cast<std::size_t>(p.use[p.rx_count % p.use.size()])];
  }
  bool room(Link& l, int wrs);
  void post_credit(int peer_rank, int lane, Link& l);
  void poll_lane(std::size_t lane);
  /// Polls the lane's receive CQ and reposts what completed; returns how many completed.
  int poll_rx(std::size_t lane);
  /// Takes (and acknowledges) every event waiting on the lane's completion channel.
  static void drain_events(Lane& lane);
  std::uint64_t wr_id(int peer_rank, int lane) const noexcept;
  void open_listener();
  void connect_liveness(const std::vector<std::uint16_t>& ports);
  bool check_alive(Peer& p, int peer_rank);

  int rank_;
  int size_;
  std::vector<int> peer_ranks_;
  VerbsOptions opt_;
  verbs::QpTimeouts timeouts_;
  int max_wr_ = 0;
  int recv_depth_ = 0;  ///< receives posted per QP (WRITE WITH IMMEDIATE consumes one)
  std::optional<net::Listener> listener_;  ///< liveness, on every address (one cable per peer)
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::unique_ptr<Peer>> peers_;  ///< indexed by global rank; QPs die before lanes
  bool left_ = false;  ///< leave() told the peers this rank failed: no goodbye after it
  std::vector<std::pair<int, std::string>> unreachable_;  ///< peers given up at the probe
  std::unique_ptr<VerbsRelay> relay_;                     ///< declared last: stopped first
};

}  // namespace spark::transport
