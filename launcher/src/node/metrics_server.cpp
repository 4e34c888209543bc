#include "metrics_server.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <map>

#include "spark/protocol/number.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

namespace flight = protocol::flight;

std::string labels(const RankMetrics& r) {
  return "{rank=\"" + std::to_string(r.rank) + "\",host=\"" + r.host + "\"}";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Reads until the end of the request head or 200 ms; true when it is a GET.
bool read_get(int fd) {
  std::string head;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 16384) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    head.append(buf, static_cast<std::size_t>(n));
  }
  return head.rfind("GET ", 0) == 0;
}

}  // namespace

MetricsAddress parse_metrics_address(const std::string& text) {
  MetricsAddress a;
  std::string port = text;
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    const std::string host = text.substr(0, colon);
    in_addr in{};
    if (::inet_pton(AF_INET, host.c_str(), &in) != 1)
      throw UsageError("--metrics-port " + text + ": " + host +
                       " is not an IPv4 address (give ADDR:PORT, e.g. 0.0.0.0:9400, or PORT)");
    a.ipv4 = ntohl(in.s_addr);
    port = text.substr(colon + 1);
  }
  std::int64_t p = 0;
  if (protocol::parse_integer(port, 1, 65535, p) != protocol::Integer::ok)
    throw UsageError("--metrics-port " + text + ": the port must be 1..65535");
  a.port = static_cast<int>(p);
  return a;
}

std::string openmetrics_text(const std::string& job_id, const std::vector<RankMetrics>& ranks,
                             int job_failures) {
  std::string s;
  s += "# TYPE sparkrun_job_failures counter\n";
  s += "# HELP sparkrun_job_failures Failures of the job seen by sparkrun (0 or 1).\n";
  s += "sparkrun_job_failures_total{job=\"" + job_id + "\"} " + std::to_string(job_failures) + "\n";
  s += "# TYPE sparkrun_rank_failed gauge\n";
  s += "# HELP sparkrun_rank_failed 1 when the rank failed (its record, or its exit).\n";
  for (const auto& r : ranks)
    s += "sparkrun_rank_failed" + labels(r) + " " + (r.failed ? "1" : "0") + "\n";
  s += "# TYPE sparkrun_rank_operations counter\n";
  s += "# HELP sparkrun_rank_operations Operations (collectives, send/recv) the rank completed.\n";
  for (const auto& r : ranks)
    if (r.flight)
      s += "sparkrun_rank_operations_total" + labels(r) + " " +
           std::to_string(r.flight->completed) + "\n";
  s += "# TYPE sparkrun_rank_bytes counter\n";
  s += "# UNIT sparkrun_rank_bytes bytes\n";
  s += "# HELP sparkrun_rank_bytes Bytes of the rank's completed operations (its buffers).\n";
  for (const auto& r : ranks)
    if (r.flight)
      s += "sparkrun_rank_bytes_total" + labels(r) + " " + std::to_string(r.flight->bytes_done) +
           "\n";
  s += "# TYPE sparkrun_rank_wait_seconds histogram\n";
  s += "# UNIT sparkrun_rank_wait_seconds seconds\n";
  s += "# HELP sparkrun_rank_wait_seconds Waits on a peer that blocked (longer than the spin).\n";
  for (const auto& r : ranks) {
    if (!r.flight || r.flight->wait_buckets.size() != flight::kWaitBucketCount) continue;
    const std::string l = "rank=\"" + std::to_string(r.rank) + "\",host=\"" + r.host + "\"";
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < flight::kWaitBucketCount; ++b) {
      cumulative += r.flight->wait_buckets[b];
      const std::string le =
          b + 1 < flight::kWaitBucketCount ? number(flight::kWaitBuckets[b]) : "+Inf";
      s += "sparkrun_rank_wait_seconds_bucket{" + l + ",le=\"" + le + "\"} " +
           std::to_string(cumulative) + "\n";
    }
    s += "sparkrun_rank_wait_seconds_count{" + l + "} " + std::to_string(cumulative) + "\n";
    s += "sparkrun_rank_wait_seconds_sum{" + l + "} " +
         number(static_cast<double>(r.flight->wait_sum_ns) / 1e9) + "\n";
  }
  s += "# TYPE sparkrun_lane_bytes counter\n";
  s += "# UNIT sparkrun_lane_bytes bytes\n";
  s += "# HELP sparkrun_lane_bytes Payload bytes the rank sent to a peer over one lane.\n";
  auto lane_labels = [](const RankMetrics& r, const RankFlight::Lane& l) {
    return "{rank=\"" + std::to_string(r.rank) + "\",host=\"" + r.host + "\",peer=\"" +
           std::to_string(l.peer) + "\",lane=\"" + l.name + "\"}";
  };
  for (const auto& r : ranks)
    if (r.flight)
      for (const auto& l : r.flight->lanes)
        s += "sparkrun_lane_bytes_total" + lane_labels(r, l) + " " + std::to_string(l.bytes) + "\n";
  s += "# TYPE sparkrun_lane_blocked_seconds counter\n";
  s += "# UNIT sparkrun_lane_blocked_seconds seconds\n";
  s += "# HELP sparkrun_lane_blocked_seconds Time the rank's waits on a peer blocked on one "
       "lane.\n";
  for (const auto& r : ranks)
    if (r.flight)
      for (const auto& l : r.flight->lanes)
        s += "sparkrun_lane_blocked_seconds_total" + lane_labels(r, l) + " " +
             number(static_cast<double>(l.blocked_ns) / 1e9) + "\n";
  s += "# TYPE sparkrun_lane_busy_seconds counter\n";
  s += "# UNIT sparkrun_lane_busy_seconds seconds\n";
  s += "# HELP sparkrun_lane_busy_seconds Time one lane of the rank to a peer had data in flight "
       "(tcp: the kernel's busy time; 0 where the transport cannot tell).\n";
  for (const auto& r : ranks)
    if (r.flight)
      for (const auto& l : r.flight->lanes)
        s += "sparkrun_lane_busy_seconds_total" + lane_labels(r, l) + " " +
             number(static_cast<double>(l.busy_ns) / 1e9) + "\n";
  s += "# EOF\n";
  return s;
}

std::string merge_openmetrics(const std::string& job_id, const std::vector<std::string>& hosts,
                              int job_failures) {
  // Families in first-seen order: their TYPE/UNIT/HELP lines once, every text's samples.
  std::vector<std::string> order;
  std::map<std::string, std::pair<std::string, std::string>> family;  // name -> meta, samples
  std::vector<std::string> texts = {openmetrics_text(job_id, {}, job_failures)};
  texts.insert(texts.end(), hosts.begin(), hosts.end());
  for (std::size_t t = 0; t < texts.size(); ++t) {
    std::string current;
    bool first_definition = false;
    std::size_t pos = 0;
    while (pos < texts[t].size()) {
      std::size_t end = texts[t].find('\n', pos);
      if (end == std::string::npos) end = texts[t].size();
      const std::string line = texts[t].substr(pos, end - pos);
      pos = end + 1;
      if (line.empty() || line == "# EOF") continue;
      if (line.rfind("# TYPE ", 0) == 0) {
        current = line.substr(7, line.find(' ', 7) - 7);
        first_definition = family.count(current) == 0;
        if (first_definition) order.push_back(current);
      }
      // The job's failures are the launcher's (the first text): the hosts' are left out.
      if (t > 0 && current == "sparkrun_job_failures") continue;
      auto& [meta, samples] = family[current];
      if (line.rfind("# ", 0) == 0) {
        if (first_definition) meta += line + "\n";
      } else {
        samples += line + "\n";
      }
    }
  }
  std::string out;
  for (const auto& name : order) out += family[name].first + family[name].second;
  return out + "# EOF\n";
}

MetricsServer::MetricsServer(const MetricsAddress& address)
    : listen_(address.ipv4, "--metrics-port", SOCK_NONBLOCK | SOCK_CLOEXEC, 16,
              net::PortRange{address.port, address.port}) {}

net::Fd MetricsServer::accept_request() {
  net::Fd conn(::accept4(listen_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) return {};
  if (!read_get(conn.get())) {
    const char* no =
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    ssize_t n = ::send(conn.get(), no, std::char_traits<char>::length(no), MSG_NOSIGNAL);
    (void)n;
    return {};
  }
  return conn;
}

void MetricsServer::answer(net::Fd& conn, const std::string& body) {
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; "
      "charset=utf-8\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  const std::string all = head + body;
  std::size_t off = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (off < all.size() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{conn.get(), POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::send(conn.get(), all.data() + off, all.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    off += static_cast<std::size_t>(n);
  }
  conn.reset();
}

}  // namespace spark::launch
