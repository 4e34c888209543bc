// The RoCE ring relay (docs/roce.md, "Relay"): on a 4-ring the opposite node shares no cable,
// so the pair's traffic goes through the neighbour the fabric map names (Route::via). That
// node's first rank runs this relay: for every pair (x, y) it serves it holds links facing x
// (on its cable to x) and links facing y, and a progress thread moves each message that lands
// in the mailbox from x into a slot toward y (an RDMA WRITE + flag from its own staging), then
// releases x's slot, and the same the other way.
//
// To x the relay looks exactly like y (same slot layout, same WRITE + flag + credit protocol),
// so the end-to-end transport is unchanged: messages are forwarded one at a time in arrival
// order (per-pair FIFO, whatever the stripes on either hop), and credits are hop by hop: x
// gets a credit back when the relay has copied its message out, the relay when y has released
// it, so neither hop can overrun the other and the relay buffers at most `slots` messages per
// hop and direction.
//
// Fail-stop: a message that has waited for a credit toward its destination for longer than the
// timeout (SPARKNET_ROCE_TIMEOUT_MS, read each round so set_timeout_ms applies) is a stalled
// relay; so is an error completion on either hop. The first is reported once through
// `on_failure` with a record naming this rank, the destination, this node's lane toward it and
// the sequence number of the message it holds (and the group aborts, as on tcp).
//
// Threading: the relay owns a VerbsTransport of its own (its own device contexts and queues),
// used only by the relay thread once start() ran, never by the communicator's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "spark/failure.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace spark::transport {

/// One pair this rank relays: ranks x < y, and the indices into the options' devices of the
/// links facing each (the relay's ends of the lane pairs chosen toward x's and y's nodes).
struct RelayPair {
  int x = -1;
  int y = -1;
  std::vector<int> x_lanes;
  std::vector<int> y_lanes;
};

class VerbsRelay {
 public:
  using OnFailure = std::function<void(const FailureRecord&)>;
  using TimeoutSource = std::function<std::uint32_t()>;

  /// Opens the links (`base`: devices, slots, slot size, QP timing as the job's transport).
  VerbsRelay(int rank, std::string host, std::vector<RelayPair> pairs, VerbsOptions base);
  /// Drains (forwards until nothing moved for a short while, bounded by the timeout), then
  /// stops the thread.
  ~VerbsRelay();
  VerbsRelay(const VerbsRelay&) = delete;
  VerbsRelay& operator=(const VerbsRelay&) = delete;

  const std::vector<RelayPair>& pairs() const noexcept { return pairs_; }
  /// The blob ranks x and y of pair `i` connect their links to (in place of each other's).
  std::string endpoint(std::size_t i) const;
  /// Connects pair `i`'s links from x's and y's own "spark.roce" blobs (their links toward
  /// each other, which in fact face this relay).
  void connect(std::size_t i, const std::string& x_blob, const std::string& y_blob);
  /// The RDMA WRITE probe of every relay link (VerbsTransport::probe).
  std::vector<ProbeFailure> probe(std::chrono::milliseconds timeout);
  /// Starts the progress thread. `on_failure` must not throw; `timeout` is read each round.
  void start(OnFailure on_failure, TimeoutSource timeout);
  /// When set, the destructor prints one line per pair to stderr: what it forwarded
  /// ("spark: wireup: relay on HOST (rank R) forwarded N messages for rank X <-> rank Y").
  void set_report(bool on) noexcept { report_ = on; }

 private:
  void run() noexcept;
  /// Moves what it can from virtual peer `from` to `to`; true when something moved.
  bool forward(int from, int to, std::chrono::steady_clock::time_point now,
               std::chrono::steady_clock::time_point& since);
  void report(int from, int to, const std::string& why, FailureCause cause,
              std::uint32_t waited_ms);

  int rank_;
  std::string host_;
  std::vector<RelayPair> pairs_;
  std::uint32_t timeout_ms_;
  std::unique_ptr<VerbsTransport> t_;  ///< virtual peers: 2i faces pair i's x, 2i+1 its y
  OnFailure on_failure_;
  TimeoutSource timeout_source_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  std::vector<std::uint64_t> per_pair_;  ///< written by the thread; read after it ended
  bool report_ = false;
  std::thread thread_;
};

}  // namespace spark::transport
