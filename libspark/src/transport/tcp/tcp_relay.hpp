// The ring relay (docs/fabric.md): a rank whose node lies on the path between two ranks that
// share no lane forwards their tcp connection byte for byte. One small thread per relaying
// rank pipes each relayed connection between its inbound socket (from the source side) and
// its outbound socket (toward the destination), both directions, so the end-to-end tcp
// protocol (frames, credits, hellos) is unchanged. It blocks in poll() and costs nothing when
// idle; it never waits on this rank's own collectives.
//
// Fail-stop: a direction that holds bytes for the destination and cannot write any of them
// for longer than the timeout is a stalled relay; the first stall is reported once through
// `on_failure` with a record naming this rank, the destination, the lane and the last
// sequence number seen in that direction. Destruction is bounded: forwarding continues until
// every relayed connection has closed (both ends finished) or nothing moved for the timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "spark/failure.hpp"

namespace spark::transport {

/// One relayed connection: `a_fd` faces the rank that connected (src), `b_fd` faces dst.
struct RelayPipe {
  int a_fd = -1;
  int b_fd = -1;
  int src = -1;        ///< rank on the a side
  int dst = -1;        ///< rank on the b side
  std::string a_lane;  ///< this node's lane toward src's side (for records), e.g. "tcp:to0"
  std::string b_lane;  ///< this node's lane toward dst's side, e.g. "tcp:to2", "tcp:via r2/to2"
  // Multi-hop routes: the next relay toward dst (b side) and toward src (a side), -1 when the
  // socket reaches the rank itself; hosts for the record's detail (lane names are short).
  int b_next = -1;
  std::string b_next_host;
  int a_next = -1;
  std::string a_next_host;
};

class TcpRelay {
 public:
  using OnFailure = std::function<void(const FailureRecord&)>;
  /// Where the current timeout in ms is read (each round), so set_timeout_ms applies to the
  /// relay too. Called from the relay thread; must outlive it.
  using TimeoutSource = std::function<std::uint32_t()>;
  /// Takes ownership of the pipes' sockets and starts the thread.
  TcpRelay(int rank, std::string host, std::vector<RelayPipe> pipes,
           std::chrono::milliseconds timeout, OnFailure on_failure,
           std::size_t buffer_bytes = 256 * 1024, TimeoutSource timeout_source = nullptr);
  /// Bounded drain (see above), then stops the thread and closes every socket.
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  /// Bytes forwarded so far, both directions (for tests and traces).
  std::uint64_t forwarded() const noexcept { return forwarded_.load(std::memory_order_relaxed); }
  /// True once a stall was reported.
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }

 private:
  void run() noexcept;

  int rank_;
  std::string host_;
  std::vector<RelayPipe> pipes_;
  std::chrono::milliseconds timeout_;
  OnFailure on_failure_;
  TimeoutSource timeout_source_;
  std::size_t buffer_bytes_;
  int wake_[2] = {-1, -1};  ///< self-pipe: destruction wakes the thread
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> forwarded_{0};
  std::thread thread_;
};

}  // namespace spark::transport
