// The transport interface: a one-sided mailbox model that shm, tcp and roce (verbs) implement,
// and their set-up (Gloo's pair: publish an endpoint, connect from the peers' bytes).
//
// Model
// -----
// Every rank owns, for each peer and each lane to that peer, a receive region (the "mailbox")
// split into `slots()` slots of `slot_bytes()` payload bytes each. Messages from one peer are
// a FIFO: each message travels on a lane that both ends derive alike from the messages before
// it (roce: message i on lane i % lanes; tcp: the next lane after a whole piece, the same lane
// after a smaller message) and lands in the next slot of that lane's mailbox. Sending a message:
//   1. the sender needs a credit: the receiver has released the message `slots` before it on
//      that lane;
//   2. it writes the payload into the slot of the *receiver's* region
//        shm:   memcpy into the peer's shared segment
//        tcp:   socket send; the receiver's progress engine copies it into the slot
//        verbs: RDMA WRITE into the peer's registered region (the region's rkey/addr are
//               exchanged at wire-up), from a registered staging buffer;
//   3. it publishes the slot's header/flag {seq, step, call, bytes, ...} *after* the payload
//        shm:   header fields, then a release store of the per-lane `head` counter
//        tcp:   the header travels in front of the payload; the receiver publishes it
//        verbs: RDMA WRITE WITH IMMEDIATE, or a second WRITE of the header whose last word
//               is a sequence flag the receiver polls (ordered after the payload on one QP).
// The receiver waits for the flag (Transport::peek returns the message once published),
// reads the payload in place, and calls release(): the slot returns to the sender as a
// credit (shm: `tail` counter in the shared region; tcp: a credit frame; verbs: a small
// RDMA WRITE of the released count into the sender's credit word).
//
// Nothing in this interface blocks for long. The communicator owns the ONE wait point
// (comm/wait.cpp): it polls peek()/can_send()/send_idle(), calls progress(), asks
// peer_status() for dead peers, and, after spinning as long as the wait policy says
// (comm/wait_policy.hpp), calls block() in slices that never exceed the remaining deadline.
// That is where the fail-stop FailureRecord is made: the wait point knows peer, lane
// (lane_name), seq, step, op and timeout. A CUDA path can wait on the same flags when they
// live in pinned host memory.
//
// Threading: a Transport is used by the one thread that runs collectives. Only
// Communicator::set_timeout_ms and failure() are called from other threads, and they do not
// touch transports.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spark/config/options.hpp"
#include "spark/failure.hpp"

namespace spark::bootstrap {
class Bootstrap;
}

namespace spark::transport {

/// The collective call a message belongs to, as 16 opaque bytes: coll/call_desc.hpp writes and
/// compares them (mismatch detection); transports only carry them.
struct CallBytes {
  std::uint64_t word[2] = {0, 0};
};

/// The header carried in front of every message (and published as the slot's flag).
struct MsgHeader {
  std::uint64_t seq = 0;    ///< operation sequence number (per communicator; per pair for p2p)
  std::uint32_t step = 0;   ///< step of the algorithm (0 = first phase, 1 = second ...)
  std::uint32_t piece = 0;  ///< index of the piece inside the step
  std::uint32_t bytes = 0;  ///< payload bytes in this slot (<= slot_bytes())
  std::uint32_t kind = 0;   ///< transport-private (tcp frame type, shm publication flag)
  CallBytes call;           ///< 16 bytes
};
static_assert(sizeof(MsgHeader) == 40);

/// A published message, valid until release().
struct RecvView {
  const MsgHeader* header = nullptr;
  const std::byte* data = nullptr;
};

/// What the wait point is waiting for (so block() can wait on the right flag / fd).
enum class WaitKind : std::uint8_t { data, credit, send_done };

/// Health of the connection to one peer. left: the peer failed, said so (leave()) and may
/// still be alive; closed: its process or connection is gone.
enum class PeerState : std::uint8_t { ok, closed, error, left };

/// What wire-up (comm/wireup.cpp) gives a transport's factory (registry.hpp) and connect().
struct Setup {
  int rank = 0;
  int size = 1;
  std::vector<int> peers;          ///< the ranks this transport reaches, ascending
  std::vector<std::string> nodes;  ///< node id of every rank (SPARK_HOST)
  const CommOptions* options = nullptr;
  /// For a transport that exchanges more than its endpoint (tcp's fabric map puts keys and
  /// fences: it must then exist on every rank, under a condition every rank computes alike).
  bootstrap::Bootstrap* boot = nullptr;
  std::chrono::milliseconds join{60000};  ///< set-up deadline (SPARK_JOIN_TIMEOUT_MS)
  /// Failures found off the wait point (tcp's relay thread); must not throw.
  std::function<void(const FailureRecord&)> on_failure;
  std::function<std::uint32_t()> timeout_ms;  ///< the communicator's current timeout
  /// The job's data-plane token (drawn by rank 0, handed over by the bootstrap): network
  /// transports put it in every hello and drop connections without it (docs/reliability.md).
  std::array<std::uint8_t, 16> token{};
  /// A second instance for some ranks only (the wire-up's tcp fallback): it must take no
  /// fence of its own (tcp: no fabric map round; the pair shares a subnet).
  bool fallback = false;

  bool one_node() const {  ///< every rank on one node
    return std::all_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n == nodes[0]; });
  }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // --- set-up: publish, fence, connect, barrier, connected -----------------------------------
  /// The bytes peers connect from; wire-up publishes them under "spark.<name()>".
  virtual std::string endpoint() const = 0;
  /// After the fence: connects to every rank of setup.peers from endpoints[rank] (the bytes
  /// that rank published; "" for ranks this transport does not reach).
  virtual void connect(const Setup& setup, const std::vector<std::string>& endpoints) = 0;
  /// After the barrier that ends wire-up, when every peer is connected (shm unlinks its name).
  virtual void connected() noexcept {}
  /// Rank ring over direct links when not every node pair is linked (the collectives then
  /// take ring algorithms, coll/ring.cpp; identical on every rank); empty: no such ring.
  virtual std::vector<int> direct_ring() const { return {}; }
  /// After connect: peers of setup.peers this transport turned out not to reach, with the
  /// reason (both ends of a pair agree). The wire-up reaches them over tcp instead (roce under
  /// SPARK_TRANSPORT=auto when every RDMA WRITE probe to a peer failed: docs/roce.md).
  virtual std::vector<std::pair<int, std::string>> unreachable() const { return {}; }

  virtual std::string_view name() const noexcept = 0;  ///< "tcp", "shm", "roce"
  /// Payload bytes per slot: the largest message; collectives cut data into pieces this size.
  virtual std::size_t slot_bytes() const noexcept = 0;
  /// Lane name of the next message to (send) or from (recv) `peer`, e.g. "tcp:1", "shm".
  virtual std::string lane_name(int peer, WaitKind kind) const = 0;
  /// The names of every lane to `peer` by lane index (the flight recorder's per-lane counts).
  virtual std::vector<std::string> lane_names(int peer) const {
    return {lane_name(peer, WaitKind::data)};
  }
  /// The index (into lane_names) of the lane of the next message to (credit, send_done) or
  /// from (data) `peer`: lane_name's lane. Asked only of peers with several lanes.
  virtual std::size_t lane_index(int /*peer*/, WaitKind /*kind*/) const noexcept { return 0; }
  /// How long lane `lane` to `peer` had data in flight, in all (tcp: the kernel's busy time);
  /// zero where the transport cannot tell. A lane's rate is its bytes over its busy time: the
  /// slow-lane warning compares a peer's lanes by it. A system call: slow path only.
  virtual std::chrono::nanoseconds lane_busy(int /*peer*/, std::size_t /*lane*/) const {
    return {};
  }
  /// What the short lane name cannot hold, for the record's detail (e.g. the relaying host of
  /// a relayed tcp lane); "" when the name says it all.
  virtual std::string lane_detail(int /*peer*/, WaitKind /*kind*/) const { return {}; }

  // --- sending: a one-sided write into the peer's mailbox -----------------------------------
  /// True when the next slot of the peer's mailbox is free (a credit is available).
  virtual bool can_send(int peer) = 0;
  /// Requires can_send(peer). Copies `header.bytes` bytes from `data` into the next slot of
  /// the peer's mailbox (or into registered staging that the transport writes out later) and
  /// publishes the header. `data` may be reused as soon as send() returns.
  virtual void send(int peer, const MsgHeader& header, const void* data) = 0;
  /// True when everything sent to `peer` has left this process (tcp: written to the socket;
  /// verbs: write completions seen). An operation does not return before this holds.
  virtual bool send_idle(int peer) = 0;

  // --- receiving ----------------------------------------------------------------------------
  /// The next message from `peer` once its flag is published; nullptr data/header otherwise.
  virtual RecvView peek(int peer) = 0;
  /// Gives the slot of the message peek() returned back to the sender (a credit).
  virtual void release(int peer) = 0;

  // --- progress, blocking, health -----------------------------------------------------------
  /// Non-blocking: moves bytes (tcp sockets, verbs completions). Cheap when idle.
  virtual void progress() = 0;
  /// True when progress() has queued work that other peers depend on (the wait point then
  /// avoids long blocking on another transport).
  virtual bool has_pending() const noexcept = 0;
  /// Sleeps until something about `peer`/`kind` may have changed, or `max` elapsed (never
  /// longer). Spurious returns are fine.
  virtual void block(int peer, WaitKind kind, std::chrono::microseconds max) = 0;
  /// How long the last wake-up out of block() took, from the peer's wake call to this rank
  /// running again, where the transport can tell (shm: the waker stamps the time); cleared by
  /// the call. The wait policy learns from it what a block really costs.
  virtual std::optional<std::chrono::nanoseconds> take_wake_latency() noexcept {
    return std::nullopt;
  }
  /// Whether the peer is still there; `detail` gets a reason when it is not.
  virtual PeerState peer_state(int peer, std::string* detail) = 0;
  /// This rank failed (its record is made): tell every peer at once, before the process ends
  /// (its exit can take long: RDMA teardown) or while it lives on (SPARK_ON_FAILURE=raise). A
  /// peer waiting on this rank then fails with peer_closed at once instead of timing out on
  /// it: in a cascade (rank 2 stopped, rank 1 timed out on it, rank 0 waits on rank 1) the
  /// records name the stopped rank or this one's leaving, never a timeout of a rank that was
  /// itself waiting. The peers see PeerState::left (tcp: closed). Afterwards this rank sends
  /// nothing more through the transport. Called on the collective thread only.
  virtual void leave() noexcept {}
  /// Whether what a wait on `peer` for `kind` needs can still come: the wait point's question.
  /// A transport with several connections per peer answers for the one the wait depends on
  /// (tcp: a peer that finished and exited closes all of its connections, and a close on one
  /// can arrive before the last message on another, above all through a relay).
  virtual PeerState wait_state(int peer, WaitKind /*kind*/, std::string* detail) {
    return peer_state(peer, detail);
  }

  // --- single copy (optional): reading and writing the peer process's memory ---------------
  /// True when this process can copy straight from and into the peer's address space (shm
  /// with cross-memory attach, process_vm_readv/writev, tested at connect). Large collectives
  /// then copy once, without the peer's CPU and without slots (coll/collectives.cpp).
  virtual bool can_access_peer(int /*peer*/) const noexcept { return false; }
  /// Copies `bytes` between local `local` and `remote` in the peer's address space (`write`:
  /// local -> remote). Returns 0, or the errno that stopped it (ESRCH: the peer is gone).
  virtual int access_peer(int /*peer*/, void* /*local*/, std::uint64_t /*remote*/,
                          std::size_t /*bytes*/, bool /*write*/) {
    return ENOSYS;
  }
};

}  // namespace spark::transport
