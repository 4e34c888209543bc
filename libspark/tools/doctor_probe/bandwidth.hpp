// `sparkrun doctor --bandwidth`: qualifies each cable at speed (docs/doctor.md, "Qualifying a new
// cable"). Per cable (a pair of hosts and a lane pair on one subnet) and direction, one bounded
// stream; each end reads its netdev's byte counter before and after, so the table shows that
// the bytes left and arrived on the interfaces the lane map names (a lane whose traffic
// crosses another cable shows a counter that did not move). The rate is judged against the
// link's reported speed, `--link-gbps`, or (neither known) the fastest direction of the run.
// The ends measure, rank 0 judges: the measuring and the pure judgement are kept apart so
// the unit tests feed the judgement made-up measurements.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host_checks.hpp"
#include "job_table.hpp"
#include "net/socket.hpp"
#include "round_trips.hpp"

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include <span>

#include "verbs/port.hpp"
#include "verbs/qp.hpp"
#endif

namespace spark::doctor {

/// What one end of one stream saw. Published by each end (the bootstrap), joined at rank 0.
struct StreamEnd {
  int test = 0;  ///< the stream's number (its link and direction)
  bool sender = false;
  std::string netdev;         ///< the interface of this end's lane
  std::uint64_t payload = 0;  ///< bytes this end sent / received
  std::int64_t counter = -1;  ///< tx (sender) / rx (receiver) byte counter delta; -1 unread
  /// RDMA: the port's own counter delta (port_xmit_data / port_rcv_data, in bytes); -1 unread
  /// (tcp, or a device without them, e.g. rxe)
  std::int64_t port_counter = -1;
  /// receiver: first byte to the end of the stream; RDMA sender: first write to the last
  /// completion (the rate when no "done" came in time)
  double seconds = 0;
  std::int64_t link_mbps = -1;  ///< the netdev's reported speed; -1 unknown
  int mtu = 0;                  ///< the netdev's MTU (0 unknown)
  std::string error;            ///< "" or what went wrong at this end
  bool operator==(const StreamEnd&) const = default;
};

/// One direction of one cable: between the first ranks a < b of two hosts, from a's tcp lane
/// `la` to b's lane `lb` (lanes on one subnet), data flowing a -> b when `a_sends`. a connects.
struct Stream {
  int a = 0, b = 0, la = 0, lb = 0;
  bool a_sends = true;
  LinkKind kind = LinkKind::tcp;  ///< RDMA lanes (an RDMA WRITE stream) or tcp lanes
  /// Every lane pair of the two hosts at once, as a job stripes them (both PCIe halves of a
  /// port, both cables of a pair); empty: the one pair la -> lb.
  std::vector<std::pair<int, int>> stripe;
  /// The lane pairs this stream runs on.
  std::vector<std::pair<int, int>> pairs() const {
    return stripe.empty() ? std::vector<std::pair<int, int>>{{la, lb}} : stripe;
  }
  bool operator==(const Stream&) const = default;
};

/// Every stream of the job in one global order (the pairs' rounds, then lane pairs, a -> b
/// before b -> a): every rank computes the same list, and a stream's place in it is its test
/// number. Ranks after the first of their host, and pairs on one host, have none. RDMA lane
/// pairs when both ranks have RDMA lanes (as the round trips), else tcp lane pairs. Two hosts
/// with two or more lane pairs (each lane in one pair) also get a striped stream each way,
/// after their single ones.
std::vector<Stream> plan_streams(const std::vector<RankLanes>& ranks);

/// The wire format of a rank's stream ends (one line each); strict decode (throws spark::Error).
std::string encode_stream_ends(const std::vector<StreamEnd>& ends);
std::vector<StreamEnd> decode_stream_ends(const std::string& text);

/// `--fail-below` / `--warn-below` (percent of the reference rate), `--link-gbps`, and
/// `--relative` (the fastest direction of the run is the reference even when a link speed is
/// reported: emulated links, where the speed a NIC reports means nothing).
struct BandwidthLimits {
  double fail_below = 50, warn_below = 80;
  std::optional<double> link_gbps;
  bool relative = false;
};

/// One direction of one cable, judged.
struct CableResult {
  std::string from, to;  ///< "rank 0 (h0)"
  std::string lane;      ///< "tcp:to1->to0"
  std::string tx_netdev, rx_netdev;
  double gbps = 0;            ///< payload rate at the receiver
  double reference_gbps = 0;  ///< what it is judged against (0: nothing to judge against)
  std::string reference;      ///< where the reference comes from
  double percent = 0;         ///< gbps / reference_gbps x 100
  std::uint64_t payload = 0;  ///< bytes received
  std::int64_t tx_bytes = -1, rx_bytes = -1;            ///< the counters' deltas
  std::int64_t tx_port_bytes = -1, rx_port_bytes = -1;  ///< the RDMA ports' counters' deltas
  int tx_mtu = 0, rx_mtu = 0;
  bool striped = false;  ///< every lane pair of the two hosts at once
  Status status = Status::ok;
  std::string detail;
};

/// The payload and seconds a direction is judged by: the receiver's measurement where it has
/// one (tcp; RDMA when the sender's "done" came in time), else the sender's (its RDMA writes
/// completed, so the peer's NIC acknowledged them). The rate in Gb/s, 0 when unmeasured.
struct Measured {
  std::uint64_t payload = 0;
  double seconds = 0;
  double gbps() const { return seconds > 0 ? static_cast<double>(payload) * 8 / seconds / 1e9 : 0; }
};
Measured measured(const StreamEnd& tx, const StreamEnd& rx);

/// The reference of one direction: --link-gbps, else (unless --relative) the slower end's
/// reported link speed, else `fastest_gbps` (the fastest direction of this run); 0 when none.
std::pair<double, std::string> reference_rate(const StreamEnd& tx, const StreamEnd& rx,
                                              const BandwidthLimits& limits, double fastest_gbps);

/// Judges one direction from its two ends: an error at either end, counters that do not show
/// the payload (it left or arrived on another interface), then the rate against the reference.
/// A striped stream is judged against the sum of its lanes' own streams (`reference`): lanes
/// that do not add up share a bottleneck (one PCIe half carrying both, one x4 link).
CableResult judge_stream(const std::string& from, const std::string& to, const std::string& lane,
                         const StreamEnd& tx, const StreamEnd& rx, const BandwidthLimits& limits,
                         double fastest_gbps,
                         const std::pair<double, std::string>* reference = nullptr);

/// One end of a striped stream from its lanes' ends: bytes and counters added, the longest
/// time, the interfaces joined with "+", every error.
StreamEnd combine_ends(const std::vector<StreamEnd>& ends);

/// The table row of a judged direction (check "bandwidth", or "striped" for all lanes at once).
JobRow cable_row(const std::string& host, int rank, const CableResult& c);

/// "9.41 Gb/s" / "812 Mb/s".
std::string format_rate(double gbps);

/// The live counters of `netdev` (sysfs under `sysfs`): tx_bytes / rx_bytes, speed (Mb/s, -1
/// unknown), MTU.
std::int64_t netdev_bytes(const std::string& sysfs, const std::string& netdev, bool tx);
/// An RDMA port's data counter in bytes (`sysfs`/class/infiniband/DEV/ports/PORT/counters/
/// port_xmit_data or port_rcv_data, which count 4-byte words); -1 when the device has none.
std::int64_t rdma_port_bytes(const std::string& sysfs, const std::string& device, int port,
                             bool tx);
std::int64_t netdev_speed_mbps(const std::string& sysfs, const std::string& netdev);
int netdev_mtu(const std::string& sysfs, const std::string& netdev);

/// The tcp stream of one direction over a connection both ends reached with the test's hello
/// (connect_with_hello / accept_with_hello): the sender writes for `seconds`, the receiver
/// counts until the sender's end (or 300 ms before `deadline`: a slow link may not deliver
/// what the sender queued in time) and closes. Each end fills its StreamEnd (counters read
/// after the receiver's go, so the hello's bytes are not counted). Bounded by `deadline`.
StreamEnd stream_send(int fd, int test, const std::string& sysfs, const std::string& netdev,
                      std::chrono::milliseconds seconds,
                      std::chrono::steady_clock::time_point deadline);
StreamEnd stream_receive(int fd, int test, const std::string& sysfs, const std::string& netdev,
                         std::chrono::steady_clock::time_point deadline);

/// The interface an RDMA device port's RoCE traffic leaves on: the netdev of its GID
/// (`sysfs`/class/infiniband/DEV/ports/PORT/gid_attrs/ndevs/GID); "" when unknown.
std::string rdma_netdev(const std::string& sysfs, const std::string& device, int port,
                        int gid_index);

#ifdef SPARK_DOCTOR_HAVE_VERBS
/// One direction of an RDMA cable: an RC queue pair between the two ends, each with a
/// registered buffer (a control page and a data region). The receiver reads its counter, then
/// writes "go" into the sender's control page; the sender writes its data region into the
/// receiver's, kStreamDepth writes in flight, for `seconds`, then writes the byte count into
/// the receiver's control page ("done"), which the receiver polls. Completions are those of
/// RC: a write completes once the peer's NIC acknowledged it. Destroy before its lane.
class RdmaStream {
 public:
  RdmaStream(verbs::OpenPort& lane, std::uint32_t timeout_ms, std::uint64_t wr_id);
  ~RdmaStream();
  RdmaStream(const RdmaStream&) = delete;
  RdmaStream& operator=(const RdmaStream&) = delete;

  std::vector<std::byte> endpoint() const;
  void connect(std::span<const std::byte> remote, int peer);
  StreamEnd send(int test, const std::string& sysfs, const std::string& netdev,
                 std::chrono::milliseconds seconds, std::chrono::steady_clock::time_point deadline);
  StreamEnd receive(int test, const std::string& sysfs, const std::string& netdev,
                    std::chrono::steady_clock::time_point deadline);

 private:
  // Posts a signaled write of [offset, offset + len) of this buffer to the peer's same offset.
  int post(std::size_t offset, std::uint32_t len, std::uint64_t wr_id);
  // Waits for `n` of this stream's completions; "" or what failed.
  std::string reap(int n, std::chrono::steady_clock::time_point deadline);
  std::uint64_t word(int i) const noexcept;

  verbs::OpenPort& lane_;
  std::uint64_t wr_id_;
  verbs::QpTimeouts timeouts_;
  void* buf_ = nullptr;
  verbs::MemoryRegion mr_;
  verbs::QueuePair qp_;
  verbs::Endpoint local_, remote_;
};
#endif

}  // namespace spark::doctor
