// The round trips of `sparkrun doctor`'s probe: a tcp echo between two lanes, and an RDMA
// WRITE ping-pong over one RC queue pair (the verbs layer, libspark/src/verbs).
// Every wait has a deadline: a peer that does not answer is an error string, never a hang.
// The tcp echo starts with the job's probe hello, answered (net/hello_exchange.hpp): the
// initiator knows it reached the job's rank, and the responder drops every other connection
// (a stranger, another job, a test that ran late) with a line under SPARK_LOG=info:doctor and
// keeps waiting for its initiator.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fabric/fabric_map.hpp"
#include "net/hello.hpp"
#include "net/socket.hpp"

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include "verbs/port.hpp"
#endif

namespace spark::doctor {

/// What one side of a round trip test saw. `error` empty = every round trip came back.
struct TripResult {
  int done = 0;  ///< round trips completed
  double min_us = 0, median_us = 0, max_us = 0;
  std::string error;
};

/// Fills min/median/max from the measured round trips (microseconds).
void summarise(TripResult& r, std::vector<double> samples_us);

/// The job's hello for one test: rank `initiator` to rank `responder`, the link's index as the
/// lane (also the echoes' tag).
struct TripHello {
  net::hello::Token token;
  int size = 0;  ///< ranks in the job
  int initiator = 0, responder = 0, index = 0;
};

/// The initiator's connection of one test: from `from` (bound to its address) to ipv4:port,
/// asking with the test's hello, again while the responder drops it (it is still in an
/// earlier test), until `deadline`. Answered: the connection; else an empty Fd and `why`.
net::Fd connect_with_hello(const fabric::Lane& from, std::uint32_t ipv4, int port,
                           const TripHello& hello, std::chrono::steady_clock::time_point deadline,
                           std::string& why);
/// The responder's connection of one test: accepts on `listener` (non-blocking) until the
/// test's initiator asks (every other connection is dropped), and answers it; else an empty Fd
/// and `why` ("no connection from the initiator").
net::Fd accept_with_hello(const net::Listener& listener, const TripHello& hello,
                          std::chrono::steady_clock::time_point deadline, std::string& why);

/// Initiator: connects from `from` (bound to its address) to ipv4:port, asks with the test's
/// hello and, answered, times `iters` 16-byte echoes. `who` names the peer and lane in errors.
TripResult tcp_initiate(const fabric::Lane& from, std::uint32_t ipv4, int port, int iters,
                        const TripHello& hello, std::chrono::milliseconds timeout,
                        const std::string& who);
/// Responder: accepts on `listener` (non-blocking) until the test's initiator asks, answers and
/// echoes `iters` messages, all within `timeout`. Returns "" or what went wrong (the initiator
/// reports the failure).
std::string tcp_respond(const net::Listener& listener, int iters, const TripHello& hello,
                        std::chrono::milliseconds timeout);

#ifdef SPARK_DOCTOR_HAVE_VERBS
/// One opened RDMA lane (port 1), as the transport opens it.
using RdmaLane = verbs::OpenPort;

/// One RC queue pair towards one peer lane, with its own small registered buffer: the peer
/// writes into word 0, this side writes out of word 8 (64 bytes on). Destroy before its lane.
class RdmaLink {
 public:
  RdmaLink(RdmaLane& lane, std::uint32_t timeout_ms, std::uint64_t wr_id);
  ~RdmaLink();
  RdmaLink(const RdmaLink&) = delete;
  RdmaLink& operator=(const RdmaLink&) = delete;

  /// This side's endpoint, serialised for the bootstrap.
  std::vector<std::byte> endpoint() const;
  /// Brings the QP to RTS towards the peer's serialised endpoint (throws: MTU mismatch, ...).
  void connect(std::span<const std::byte> remote, int peer);
  TripResult initiate(int iters, std::chrono::milliseconds timeout, const std::string& who);
  std::string respond(int iters, std::chrono::milliseconds timeout);

 private:
  // Posts one 8-byte write of `value` and waits for its completion; "" or the error.
  std::string write(std::uint64_t value, std::chrono::steady_clock::time_point deadline);
  std::uint64_t received() const noexcept;

  RdmaLane& lane_;
  std::uint64_t wr_id_;
  verbs::QpTimeouts timeouts_;
  void* buf_ = nullptr;  // 4 KiB, page aligned (freed in the destructor, after mr_)
  verbs::MemoryRegion mr_;
  verbs::QueuePair qp_;
  verbs::Endpoint local_, remote_;
};
#endif

}  // namespace spark::doctor
