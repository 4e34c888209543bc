#include "job_table.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>

#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::doctor {

namespace {

constexpr char kField = '\x1f';

// Control characters would break the line format (and the terminal): made visible.
std::string clean(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out;
}

std::string rank_name(const std::vector<RankLanes>& ranks, int r) {
  return "rank " + std::to_string(r) + " (" + ranks[static_cast<std::size_t>(r)].host + ")";
}

}  // namespace

JobRow host_row(const std::string& host, int rank, const Row& row) {
  JobRow j;
  j.host = host;
  j.rank = rank;
  j.check = row.check;
  j.lane = row.item;
  j.status = row.status;
  j.detail = row.detail;
  return j;
}

std::string encode_rows(const std::vector<JobRow>& rows) {
  std::string out;
  for (const JobRow& r : rows) {
    out += clean(r.host) + kField + std::to_string(r.rank) + kField + clean(r.check) + kField +
           clean(r.lane) + kField + clean(r.peer) + kField + status_text(r.status) + kField +
           (r.latency_us < 0 ? std::string("-") : std::to_string(r.latency_us)) + kField +
           clean(r.detail) + '\n';
  }
  return out;
}

std::vector<JobRow> decode_rows(const std::string& text) {
  std::vector<JobRow> rows;
  for (const auto line : fabric::split(text, '\n')) {
    if (line.empty()) continue;
    auto f = fabric::split(line, kField);
    if (f.size() != 8)
      throw Error("doctor: malformed result line from a rank: '" + std::string(line) + "'");
    JobRow r;
    r.host = f[0];
    std::int64_t rank = 0;
    if (protocol::parse_integer(f[1], -1, INT32_MAX, rank) != protocol::Integer::ok)
      throw Error("doctor: malformed rank '" + std::string(f[1]) + "' in a result line");
    r.rank = static_cast<int>(rank);
    r.check = f[2];
    r.lane = f[3];
    r.peer = f[4];
    if (f[5] == "ok")
      r.status = Status::ok;
    else if (f[5] == "WARN")
      r.status = Status::warn;
    else if (f[5] == "FAIL")
      r.status = Status::fail;
    else if (f[5] == "info")
      r.status = Status::info;
    else
      throw Error("doctor: malformed result '" + std::string(f[5]) + "' in a result line");
    if (f[6] != "-") {
      double us = -1;
      const auto end = f[6].data() + f[6].size();
      if (std::from_chars(f[6].data(), end, us).ptr != end || us < 0)
        throw Error("doctor: malformed latency '" + std::string(f[6]) + "' in a result line");
      r.latency_us = us;
    }
    r.detail = f[7];
    rows.push_back(std::move(r));
  }
  return rows;
}

bool lanes_pair(const fabric::Lane& x, const std::string& hx, const fabric::Lane& y,
                const std::string& hy) {
  if (x.ipv4 == y.ipv4) return hx == hy && x.name == y.name;
  return fabric::same_subnet(x, y);
}

std::vector<Link> plan_links(const std::vector<RankLanes>& ranks) {
  std::vector<Link> links;
  const int n = static_cast<int>(ranks.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const RankLanes& ra = ranks[static_cast<std::size_t>(a)];
      const RankLanes& rb = ranks[static_cast<std::size_t>(b)];
      const bool rdma = !ra.rdma.empty() && !rb.rdma.empty();
      const auto& la = rdma ? ra.rdma : ra.tcp;
      const auto& lb = rdma ? rb.rdma : rb.tcp;
      int index = 0;
      for (int i = 0; i < static_cast<int>(la.size()); ++i)
        for (int j = 0; j < static_cast<int>(lb.size()); ++j)
          if (lanes_pair(la[static_cast<std::size_t>(i)], ra.host, lb[static_cast<std::size_t>(j)],
                         rb.host))
            links.push_back({a, b, rdma ? LinkKind::rdma : LinkKind::tcp, i, j, index++});
    }
  }
  return links;
}

std::vector<std::vector<std::pair<int, int>>> plan_rounds(int size) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  std::vector<std::vector<bool>> busy;
  for (int a = 0; a < size; ++a)
    for (int b = a + 1; b < size; ++b) {
      std::size_t r = 0;
      while (r < rounds.size() &&
             (busy[r][static_cast<std::size_t>(a)] || busy[r][static_cast<std::size_t>(b)]))
        ++r;
      if (r == rounds.size()) {
        rounds.emplace_back();
        busy.emplace_back(static_cast<std::size_t>(size), false);
      }
      rounds[r].push_back({a, b});
      busy[r][static_cast<std::size_t>(a)] = busy[r][static_cast<std::size_t>(b)] = true;
    }
  return rounds;
}

std::string lane_label(const RankLanes& r, LinkKind kind, int lane) {
  const auto& v = kind == LinkKind::rdma ? r.rdma : r.tcp;
  const std::string& name = v.at(static_cast<std::size_t>(lane)).name;
  return kind == LinkKind::rdma ? name : "tcp:" + name;
}

std::vector<fabric::Lane> combined_lanes(const RankLanes& r) {
  std::vector<fabric::Lane> out = r.rdma;
  for (fabric::Lane l : r.tcp) {
    l.name = "tcp:" + l.name;
    out.push_back(std::move(l));
  }
  return out;
}

fabric::FabricMap rank_map(const std::vector<RankLanes>& ranks, const std::vector<Link>& passed) {
  using fabric::Route;
  const int n = static_cast<int>(ranks.size());
  std::vector<std::vector<Route>> routes(static_cast<std::size_t>(n),
                                         std::vector<Route>(static_cast<std::size_t>(n)));
  auto at = [&](int a, int b) -> Route& {
    return routes[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)];
  };
  for (int a = 0; a < n; ++a) at(a, a).kind = Route::Kind::self;
  for (const Link& l : passed) {
    const int off_a = l.kind == LinkKind::rdma
                          ? 0
                          : static_cast<int>(ranks[static_cast<std::size_t>(l.a)].rdma.size());
    const int off_b = l.kind == LinkKind::rdma
                          ? 0
                          : static_cast<int>(ranks[static_cast<std::size_t>(l.b)].rdma.size());
    for (auto [x, y, lx, ly] : {std::tuple{l.a, l.b, off_a + l.la, off_b + l.lb},
                                std::tuple{l.b, l.a, off_b + l.lb, off_a + l.la}}) {
      Route& r = at(x, y);
      r.kind = Route::Kind::direct;
      r.hops = 1;
      r.lanes.push_back({lx, ly});
    }
  }
  fabric::add_relays(routes);  // the rule the fabric map uses
  return fabric::FabricMap(std::move(routes));
}

std::vector<JobRow> reach_rows(const std::vector<RankLanes>& ranks, const fabric::FabricMap& map) {
  std::vector<JobRow> rows;
  const int n = map.size();
  for (int a = 0; a < n; ++a) {
    const auto lanes_a = combined_lanes(ranks[static_cast<std::size_t>(a)]);
    for (int b = a + 1; b < n; ++b) {
      const auto lanes_b = combined_lanes(ranks[static_cast<std::size_t>(b)]);
      const fabric::Route& r = map.route(a, b);
      JobRow row;
      row.host = ranks[static_cast<std::size_t>(a)].host;
      row.rank = a;
      row.check = "reach";
      row.peer = rank_name(ranks, b);
      switch (r.kind) {
        case fabric::Route::Kind::direct: {
          std::string lanes, detail;
          for (auto lp : r.lanes) {
            const auto& x = lanes_a[static_cast<std::size_t>(lp.local)];
            const auto& y = lanes_b[static_cast<std::size_t>(lp.remote)];
            lanes += (lanes.empty() ? "" : ",") + x.name;
            detail += (detail.empty() ? "" : " ") + x.name + "(" + fabric::format_ipv4(x.ipv4) +
                      ")->" + y.name + "(" + fabric::format_ipv4(y.ipv4) + ")";
          }
          row.lane = lanes;
          row.detail = "direct on " + std::to_string(r.lanes.size()) + " lane(s): " + detail;
          break;
        }
        case fabric::Route::Kind::relay:
          row.status = Status::info;
          row.detail = "no direct lane: relay via " + rank_name(ranks, r.via) + " (" +
                       std::to_string(r.hops) + " hops)";
          break;
        default:
          row.status = Status::fail;
          row.detail =
              "UNREACHABLE: no lane passed a round trip and no neighbour relays; check the "
              "cabling, the addresses (one subnet per cable) and SPARK_DATA_NET";
          break;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::string format_latency(double us) {
  char buf[32];
  if (us < 1000)
    std::snprintf(buf, sizeof buf, "%.1f us", us);
  else
    std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000);
  return buf;
}

std::string render_job(const std::vector<JobRow>& rows) {
  const std::vector<std::string> head = {"HOST", "RANK",   "CHECK",   "LANE",
                                         "PEER", "RESULT", "LATENCY", "DETAIL"};
  std::vector<std::vector<std::string>> cells;
  for (const JobRow& r : rows)
    cells.push_back({r.host, r.rank < 0 ? "-" : std::to_string(r.rank), r.check, r.lane, r.peer,
                     status_text(r.status), r.latency_us < 0 ? "-" : format_latency(r.latency_us),
                     r.detail});
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : cells) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string out;
    for (std::size_t c = 0; c < v.size(); ++c) {
      out += v[c];
      if (c + 1 < v.size()) out += std::string(w[c] - v[c].size() + 2, ' ');
    }
    return out + "\n";
  };
  std::string out = line(head);
  for (const auto& row : cells) out += line(row);
  return out + verdict(rows).line();
}

}  // namespace spark::doctor
