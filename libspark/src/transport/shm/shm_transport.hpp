// Shared-memory transport for ranks on the same node: each rank creates one POSIX shared
// memory segment holding a mailbox per local peer; peers map it and memcpy payloads straight
// into its slots (a one-sided write). Waiting spins briefly, then blocks on a futex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "transport/shm/shm_endpoint.hpp"
#include "transport/transport.hpp"

namespace spark::transport {

struct ShmOptions {
  std::size_t slots = 8;
  std::size_t slot_bytes = 256 * 1024;
  bool cross_memory = true;  ///< probe peers for cross-memory attach (SPARK_SHM_CMA)
  bool membarrier = true;    ///< the sleeper pays the wake-up fence (SPARK_SHM_MEMBARRIER)
};

class ShmTransport final : public Transport {
 public:
  /// `node_ranks`: every rank of this node that uses shm, sorted, including `rank`.
  /// Creates and maps this rank's segment (named with `job_id` and `node_id`).
  ShmTransport(int rank, int size, std::vector<int> node_ranks, const std::string& job_id,
               const std::string& node_id, ShmOptions options);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  /// What peers need to attach: "segment-name;pid;pid-namespace;probe-address;cookie" (the probe
  /// word, holding the cookie, is where peers test that they may read and write this process's
  /// memory).
  std::string endpoint() const override;
  /// Maps every peer's segment (attach) from its endpoint string.
  void connect(const Setup& setup, const std::vector<std::string>& endpoints) override;
  /// Removes this rank's segment name from /dev/shm (every peer attached).
  void connected() noexcept override { unlink(); }
  /// Maps the peer's segment from its endpoint string.
  void attach(int peer, const std::string& endpoint);
  void unlink() noexcept;
  const std::string& segment_name() const noexcept { return name_; }
  /// Whether the wake-ups to and from `peer` fence on the sleeper's side only (membarrier).
  bool light_fences(int peer) const noexcept;

  std::string_view name() const noexcept override { return "shm"; }
  std::size_t slot_bytes() const noexcept override { return opt_.slot_bytes; }
  std::string lane_name(int peer, WaitKind kind) const override;
  bool can_send(int peer) override;
  void send(int peer, const MsgHeader& header, const void* data) override;
  bool send_idle(int) override { return true; }
  RecvView peek(int peer) override;
  void release(int peer) override;
  void progress() override {}
  bool has_pending() const noexcept override { return false; }
  void block(int peer, WaitKind kind, std::chrono::microseconds max) override;
  std::optional<std::chrono::nanoseconds> take_wake_latency() noexcept override;
  PeerState peer_state(int peer, std::string* detail) override;
  void leave() noexcept override;
  bool can_access_peer(int peer) const noexcept override;
  int access_peer(int peer, void* local, std::uint64_t remote, std::size_t bytes,
                  bool write) override;

  struct Region;  // shared layout, see .cpp

 private:
  struct Mapping {
    void* base = nullptr;
    std::size_t bytes = 0;
  };
  struct Peer {
    Region* rx = nullptr;  ///< messages from the peer: a region in my segment
    Region* tx = nullptr;  ///< messages to the peer: my region in the peer's segment
    Mapping map;           ///< the peer's segment
    int pidfd = -1;        ///< the peer's process itself, whatever its pid names later
    int pid = 0;
    /// process_vm_readv/writev into the peer work (tested at attach; needs the pidfd, which
    /// tells whether `pid` still names the peer: access_peer)
    bool cma = false;
    /// Both ends registered for membarrier: the Dekker pairs of the wake-ups put the fence on
    /// the sleeper's side (heavy_fence.hpp) and none on the message's.
    bool light = false;
    /// The message count at which the last data (credit) sleep lasted its whole slice: a
    /// block() at the same count continues that long wait and fences before it sleeps.
    std::optional<std::uint32_t> slept_through_data, slept_through_credit;
    std::uint32_t sent = 0;
    std::uint32_t tail_seen = 0;  ///< the receiver's tail when last read (credits)
    std::uint32_t received = 0;
    /// sent % slots and received % slots, kept rather than divided for on every message
    std::size_t tx_slot = 0, rx_slot = 0;
    bool gone = false;
  };
  Region* region(void* base, int index) const noexcept;
  /// The peer's process has exited (its pidfd is readable); remembered in `gone`.
  bool exited(Peer& p);
  /// Whether cross-memory attach to `p` works, and if not, why (for the log line).
  bool probe_cross_memory(Peer& p, const ShmEndpoint& ep, std::string& why);
  int index_of(int rank) const;
  Peer& peer(int rank);

  int rank_;
  std::vector<int> node_ranks_;
  ShmOptions opt_;
  std::size_t region_bytes_ = 0;
  std::string name_;
  Mapping own_;
  bool unlinked_ = false;
  bool membarrier_ = false;  ///< this process registered for membarrier (opt_.membarrier)
  /// Peers read and write this (never read here) to test cross-memory attach.
  alignas(64) std::uint64_t probe_[8] = {};
  std::optional<std::chrono::nanoseconds> wake_latency_;  ///< of the last wake-up by a peer
  std::vector<std::unique_ptr<Peer>> peers_;  ///< indexed by global rank (null if not shm)
};

}  // namespace spark::transport
