// The transport interface: a one-sided mailbox model that tcp, shm and (later) verbs implement.
//
// Model
// -----
// Every rank owns, for each peer and each lane to that peer, a receive region (the "mailbox")
// split into `slots()` slots of `slot_bytes()` payload bytes each. Messages from one peer are
// a FIFO: message i from a peer travels on lane (i % lanes) and lands in slot
// ((i / lanes) % slots) of that lane's mailbox. Sending message i:
//   1. the sender needs a credit: the receiver has released message i - slots on that lane;
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
// peer_status() for dead peers, and, after spinning for SPARK_SPIN_US, calls block() in
// slices that never exceed the remaining deadline. That is where the fail-stop FailureRecord
// is made: the wait point knows peer, lane (lane_name), seq, step, op and timeout. A CUDA
// path can wait on the same flags when they live in pinned host memory.
//
// Threading: a Transport is used by the one thread that runs collectives. Only
// Communicator::set_timeout_ms and failure() are called from other threads, and they do not
// touch transports.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spark::transport {

/// Which collective a message belongs to (part of every message, for mismatch detection).
enum class Coll : std::uint8_t {
  none = 0,
  allreduce,
  reduce_scatter,
  allgather,
  broadcast,
  alltoall,
  alltoallv,
  sendrecv,
  barrier,
};

/// The call a message belongs to: enough to name it in a mismatch report.
struct CallDesc {
  Coll coll = Coll::none;
  std::uint8_t dtype = 0;  ///< spark::DType
  std::uint8_t op = 0;     ///< spark::ReduceOp (0 when not a reduction)
  std::uint8_t pad = 0;
  std::int32_t root = -1;   ///< broadcast root, -1 otherwise
  std::uint64_t count = 0;  ///< element count as the sender sees it for this pair
  bool operator==(const CallDesc&) const = default;
};

/// The header carried in front of every message (and published as the slot's flag).
struct MsgHeader {
  std::uint64_t seq = 0;    ///< operation sequence number (per communicator; per pair for p2p)
  std::uint32_t step = 0;   ///< step of the algorithm (0 = first phase, 1 = second ...)
  std::uint32_t piece = 0;  ///< index of the piece inside the step
  std::uint32_t bytes = 0;  ///< payload bytes in this slot (<= slot_bytes())
  std::uint32_t kind = 0;   ///< transport-private (tcp frame type, shm publication flag)
  CallDesc call;            ///< 16 bytes
};
static_assert(sizeof(MsgHeader) == 40);

/// A published message, valid until release().
struct RecvView {
  const MsgHeader* header = nullptr;
  const std::byte* data = nullptr;
};

/// What the wait point is waiting for (so block() can wait on the right flag / fd).
enum class WaitKind : std::uint8_t { data, credit, send_done };

/// Health of the connection to one peer.
enum class PeerState : std::uint8_t { ok, closed, error };

class Transport {
 public:
  virtual ~Transport() = default;

  virtual std::string_view name() const noexcept = 0;  ///< "tcp", "shm", "roce"
  /// Payload bytes per slot: the largest message; collectives cut data into pieces this size.
  virtual std::size_t slot_bytes() const noexcept = 0;
  /// Lane name of the next message to (send) or from (recv) `peer`, e.g. "tcp:1", "shm".
  virtual std::string lane_name(int peer, WaitKind kind) const = 0;
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
  /// Whether the peer is still there; `detail` gets a reason when it is not.
  virtual PeerState peer_state(int peer, std::string* detail) = 0;
};

}  // namespace spark::transport
