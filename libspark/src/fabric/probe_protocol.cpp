#include "fabric/probe_protocol.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <tuple>

#include "fabric/local_lanes.hpp"
#include "log/log.hpp"
#include "net/hello_exchange.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::fabric {

std::string encode_triples(const std::vector<Triple>& entries) {
  std::string out;
  for (const auto& [x, y, z] : entries)
    out += std::to_string(x) + ":" + std::to_string(y) + ":" + std::to_string(z) + ";";
  return out;
}

std::vector<Triple> decode_triples(std::string_view text) {
  const std::string s(text);  // sscanf needs the terminator
  std::vector<Triple> out;
  for (std::size_t p = 0; p < s.size();) {
    Triple t{};
    if (std::sscanf(s.c_str() + p, "%d:%d:%d;", &t[0], &t[1], &t[2]) != 3) break;
    out.push_back(t);
    p = s.find(';', p);
    if (p == std::string::npos) break;
    ++p;
  }
  return out;
}

std::string encode_ports(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

namespace {

std::vector<int> decode_numbers(std::string_view text, std::int64_t lo, std::int64_t hi,
                                const char* what, std::string_view who) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (auto item : split(text, ',')) {
    std::int64_t p = 0;
    if (protocol::parse_integer(item, lo, hi, p) != protocol::Integer::ok)
      throw BootstrapError("malformed " + std::string(what) + " list '" + std::string(text) +
                           "' from " + std::string(who));
    out.push_back(static_cast<int>(p));
  }
  return out;
}

}  // namespace

std::vector<int> decode_ports(std::string_view text, std::string_view who) {
  return decode_numbers(text, 1, 65535, "port", who);
}

std::vector<int> decode_mtus(std::string_view text, std::string_view who) {
  return decode_numbers(text, 0, 1 << 20, "MTU", who);
}

Nodes group_by_host(const std::vector<std::string>& host_of_rank) {
  Nodes n;
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    auto it = std::find(n.hosts.begin(), n.hosts.end(), host_of_rank[r]);
    if (it == n.hosts.end()) {
      n.hosts.push_back(host_of_rank[r]);
      n.speaker.push_back(static_cast<int>(r));
      it = n.hosts.end() - 1;
    }
    n.node_of.push_back(static_cast<int>(it - n.hosts.begin()));
  }
  return n;
}

bool probe_lane(const Lane& from, int me, int lane, int to, std::uint32_t ipv4, int port,
                std::chrono::milliseconds timeout, const net::hello::Token& token, int nodes) {
  const auto deadline = net::hello::Clock::now() + timeout;
  net::Fd s = net::connect_within(from.ipv4, ipv4, port, timeout);
  if (!s) return false;
  const std::string why =
      net::hello::ask(s.get(), {net::hello::Kind::probe, me, lane, to}, token, nodes, deadline);
  if (!why.empty() && log::enabled(log::Level::info, "fabric"))
    log::line("fabric", "probe from lane " + from.name + " to node " + std::to_string(to) + " at " +
                            format_ipv4(ipv4) + ":" + std::to_string(port) + " is no lane: " + why);
  return why.empty();
}

std::string probe_higher(const std::vector<std::vector<Lane>>& lanes, int me,
                         const std::function<int(int, std::size_t)>& port,
                         std::chrono::milliseconds timeout, const net::hello::Token& token) {
  std::vector<Triple> ok;
  const auto& mine = lanes[static_cast<std::size_t>(me)];
  const auto each = std::min(timeout, std::chrono::milliseconds(3000));
  for (int b = me + 1; b < static_cast<int>(lanes.size()); ++b) {
    const auto& theirs = lanes[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < mine.size(); ++i)
      for (std::size_t j = 0; j < theirs.size(); ++j)
        if (same_subnet(mine[i], theirs[j]) &&
            probe_lane(mine[i], me, static_cast<int>(i), b, theirs[j].ipv4, port(b, j), each, token,
                       static_cast<int>(lanes.size())))
          ok.push_back({b, static_cast<int>(i), static_cast<int>(j)});
  }
  return encode_triples(ok);
}

ProbeAnswerer::ProbeAnswerer(std::vector<int> listeners, const net::hello::Token& token, int nodes,
                             int me)
    : listeners_(std::move(listeners)),
      token_(token),
      nodes_(nodes),
      me_(me),
      stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_) throw Error("fabric: eventfd for the probe answerer failed");
  // Non-blocking: a connection reset between poll and accept must not block the thread (the
  // destructor could not stop it).
  for (int l : listeners_) ::fcntl(l, F_SETFL, ::fcntl(l, F_GETFL) | O_NONBLOCK);
  thread_ = std::thread([this] { serve(); });
}

ProbeAnswerer::~ProbeAnswerer() {
  const std::uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  thread_.join();
}

void ProbeAnswerer::serve() {
  net::hello::Waiting waiting(token_, nodes_, "fabric", log::enabled(log::Level::info, "fabric"));
  for (;;) {
    std::vector<pollfd> pfds{{stop_.get(), POLLIN, 0}};
    for (int l : listeners_) pfds.push_back({l, POLLIN, 0});
    const std::size_t first = pfds.size();
    const auto now = net::hello::Clock::now();
    const auto wake = waiting.watch(pfds, now + std::chrono::hours(1));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
    if (::poll(pfds.data(), pfds.size(), static_cast<int>(std::max<long long>(ms, 0) + 1)) < 0 &&
        errno != EINTR)
      return;
    if (pfds[0].revents != 0) return;  // the destructor: the waiting connections are closed
    for (auto& g : waiting.take(pfds, first)) {
      if (g.hello.kind != net::hello::Kind::probe || g.hello.dst != me_ || g.hello.rank == me_) {
        waiting.drop(g.fd.release(), g.from,
                     "a hello of this job that is not a probe for node " + std::to_string(me_));
        continue;
      }
      if (!net::hello::answer(g.fd.get(), g.hello, token_,
                              net::hello::Clock::now() + net::hello::kHelloWait))
        waiting.drop(g.fd.release(), g.from, "closed before its answer");
    }
    for (std::size_t i = 1; i < first; ++i)
      if ((pfds[i].revents & POLLIN) != 0) waiting.accept_from(pfds[i].fd);
  }
}

FabricMap map_from_probes(const std::vector<std::vector<Lane>>& lanes,
                          const std::vector<std::string>& published) {
  std::set<std::tuple<int, int, int, int>> works;
  for (std::size_t a = 0; a < published.size(); ++a)
    for (const auto& [b, i, j] : decode_triples(published[a]))
      works.insert({static_cast<int>(a), i, b, j});
  return build_map(lanes, [&](int a, int i, int b, int j) {
    return works.count({a, i, b, j}) > 0;
  });
}

}  // namespace spark::fabric
