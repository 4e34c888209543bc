// sparkrun --metrics-port [ADDR:]PORT: OpenMetrics text over HTTP for Prometheus, built from
// the ranks' flight recorders on each scrape (per rank: operations and bytes completed, a
// histogram of the waits that blocked, whether it failed; per job: failures). One GET per
// connection, answered inline by the node runner's loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flight_reader.hpp"
#include "net/socket.hpp"

namespace spark::launch {

/// "PORT" or "ADDR:PORT" (IPv4; default 127.0.0.1). Throws UsageError naming the problem.
struct MetricsAddress {
  std::uint32_t ipv4 = 0x7f000001;  // host order
  int port = 0;
};
MetricsAddress parse_metrics_address(const std::string& text);

/// One rank's row in the metrics: who it is and what its recorder said (none: no recorder).
struct RankMetrics {
  int rank = 0;
  std::string host;
  bool failed = false;
  const RankFlight* flight = nullptr;
};

/// The OpenMetrics exposition (ends with "# EOF").
std::string openmetrics_text(const std::string& job_id, const std::vector<RankMetrics>& ranks,
                             int job_failures);
/// One exposition from several hosts' (openmetrics_text's, a multi-host job's node runners),
/// each family once with every host's samples; the job's failures are `job_failures` (the
/// hosts' own counts are left out).
std::string merge_openmetrics(const std::string& job_id, const std::vector<std::string>& hosts,
                              int job_failures);

class MetricsServer {
 public:
  /// Listens on the address; throws spark::Error naming it when it cannot.
  explicit MetricsServer(const MetricsAddress& address);
  int fd() const noexcept { return listen_.fd(); }
  /// Accepts one connection, reads its request (at most 200 ms) and answers a GET with
  /// `body` (others with 405); closes it.
  template <class Body>
  void serve(Body&& body) {
    net::Fd conn = accept_request();
    if (conn) answer(conn, body());
  }
  /// serve() in two steps, for a body that comes later: the connection of a GET (none when
  /// the request was not one: answered 405), then its answer.
  net::Fd accept_request();
  static void answer(net::Fd& conn, const std::string& body);

 private:
  net::Listener listen_;
};

}  // namespace spark::launch
