// spark_doctor_probe: what `sparkrun doctor LAUNCH-OPTIONS` runs on every rank of the job
// (docs/doctor.md). Each rank:
//   1. publishes its host, its lanes (RDMA devices with their RoCE v2 GID address; tcp
//      interfaces, SPARK_DATA_NET selects them) and a listening port per tcp lane;
//   2. the first rank on each host runs the read-only host checks (doctor::gather/evaluate);
//   3. every pair of ranks is tested on every lane pair that shares a subnet: an RDMA WRITE
//      ping-pong over its own RC queue pair when both ranks have RDMA lanes, else a tcp echo
//      (marked tcp) that starts with the job's answered hello (its token comes from rank 0
//      through the bootstrap; a connection without it is dropped, round_trips.hpp). Tests run in
//      one global order, each within its own time window
//      (--probe-timeout-ms per test), so a silent peer is a FAIL row, never a hang;
//   4. rank 0 collects every rank's rows, adds the per-peer reach rows (direct lanes, or the
//      relay) and, for ranks on different nodes, the roce lanes a job would use toward each
//      peer (the wire-up's own choice from the same published facts, fabric/roce_lanes.hpp;
//      the job then probes each with an RDMA WRITE), and prints one table. Exit 0 only when every
//      row is ok or info.
//
//   spark_doctor_probe [--expect-mtu N] [--sysfs DIR] [--probe-timeout-ms N] [--iters N]
//   spark_doctor_probe --host-checks [--expect-mtu N] [--sysfs DIR]: step 2 alone, no job
//   (`sparkrun doctor` without launch options).
//
// Test hooks: SPARK_DOCTOR_TEST_SILENT_RANK=R makes rank R take part in everything but never
// answer a round trip (a peer whose lanes are dead); SPARK_DOCTOR_TEST_STOP_RANK=R makes rank R
// SIGSTOP itself before the round trips (a hung host: its round trips fail, then the next fence
// times out and rank 0 prints what it has plus a "job" FAIL row naming it, and aborts the job).
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bandwidth.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/job_token.hpp"
#include "fabric/local_lanes.hpp"
#include "fabric/probe_protocol.hpp"
#include "fabric/rdma_lanes.hpp"
#include "fabric/roce_lanes.hpp"
#include "host_checks.hpp"
#include "job_table.hpp"
#include "log/log.hpp"
#include "report.hpp"
#include "round_trips.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include "verbs/port.hpp"
#endif

namespace {

using namespace spark;
using namespace spark::doctor;
using bootstrap::as_bytes;
using bootstrap::to_string;
using std::chrono::milliseconds;

struct ProbeOptions {
  int expect_mtu = 9000;
  std::string sysfs = "/sys";
  int timeout_ms = 3000;
  int iters = 16;
  bool host_checks = false;
  bool json = false;
  bool bandwidth = false;
  int seconds = 2;
  BandwidthLimits limits;
};

int parse_int(const std::string& v, int lo, int hi, const std::string& what) {
  std::int64_t x = 0;
  if (protocol::parse_integer(v, lo, hi, x) != protocol::Integer::ok)
    throw ConfigError(what + " '" + v + "' is not a number " + std::to_string(lo) + ".." +
                      std::to_string(hi));
  return static_cast<int>(x);
}

// What `sparkrun doctor` passes, already checked there (a refusal here is a bug: exit 2).
ProbeOptions parse_args(int argc, char** argv) {
  ProbeOptions o;
  CLI::App app{"spark_doctor_probe"};
  app.add_flag("--host-checks", o.host_checks);
  app.add_option("--expect-mtu", o.expect_mtu)->check(CLI::Range(256, 65536));
  app.add_option("--sysfs", o.sysfs);
  app.add_option("--probe-timeout-ms", o.timeout_ms)->check(CLI::Range(10, 600000));
  app.add_option("--iters", o.iters)->check(CLI::Range(1, 100000));
  app.add_flag("--json", o.json);
  app.add_flag("--bandwidth", o.bandwidth);
  app.add_flag("--relative", o.limits.relative);
  app.add_option("--seconds", o.seconds)->check(CLI::Range(1, 600));
  double link_gbps = 0;
  auto* link = app.add_option("--link-gbps", link_gbps)->check(CLI::Range(0.001, 100000.0));
  app.add_option("--warn-below", o.limits.warn_below)->check(CLI::Range(0.0, 100.0));
  app.add_option("--fail-below", o.limits.fail_below)->check(CLI::Range(0.0, 100.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    throw ConfigError(e.what());
  }
  if (link->count() > 0) o.limits.link_gbps = link_gbps;
  return o;
}

std::string rank_label(int r, const std::string& host) {
  return "rank " + std::to_string(r) + " (" + host + ")";
}

// This rank's RDMA lanes: SPARK_LANES (the launcher's binding), else SPARK_IB_HCA, else every
// device. A named device that cannot be used is a FAIL row; an unnamed one is skipped with an
// info row (e.g. a second port without a cable).
struct RdmaSetup {
#ifdef SPARK_DOCTOR_HAVE_VERBS
  std::vector<std::unique_ptr<RdmaLane>> lanes;
#endif
  std::vector<fabric::Lane> published;
  std::string source;
};

RdmaSetup open_rdma(const ProbeOptions& o, const CommOptions& opts, const std::string& host,
                    int rank, std::vector<JobRow>& rows) {
  RdmaSetup s;
#ifdef SPARK_DOCTOR_HAVE_VERBS
  std::vector<std::string> names;
  bool named = true;
  for (const auto& [var, v] :
       {std::pair{"SPARK_LANES", opts.rdma_lanes}, std::pair{"SPARK_IB_HCA", opts.ib_hca}}) {
    if (!v) continue;
    try {
      names = spark::fabric::parse_rdma_devices(*v, var);
      s.source = var;
    } catch (const std::exception& e) {
      rows.push_back({host, rank, "lanes", "-", "-", Status::fail, -1, e.what()});
      return s;
    }
    break;
  }
  if (s.source.empty()) {
    named = false;
    s.source = "every active device";
    try {
      names = verbs::device_names();
    } catch (const std::exception&) {  // no device: no RDMA lane (the tcp round trips run)
    }
  }
  std::optional<std::string> gid_override;
  if (opts.ib_gid_index) gid_override = std::to_string(*opts.ib_gid_index);
  const auto ifaces = fabric::local_lanes({});
  for (const std::string& name : names) {
    try {
      auto lane = std::make_unique<RdmaLane>(
          verbs::open_port(name, 1, o.sysfs + "/class/infiniband", gid_override, 64));
      fabric::Lane l{name, 1, lane->ipv4(), 32};
      for (const auto& i : ifaces)
        if (i.ipv4 == l.ipv4) l.prefix = i.prefix;
      s.published.push_back(l);
      s.lanes.push_back(std::move(lane));
    } catch (const std::exception& e) {
      rows.push_back({host, rank, "lanes", name, "-", named ? Status::fail : Status::info, -1,
                      std::string(named ? "" : "not used: ") + e.what()});
    }
  }
#else
  (void)o;
  (void)host;
  (void)rank;
  (void)rows;
#endif
  return s;
}

std::string describe_lanes(const std::vector<fabric::Lane>& lanes) {
  std::string out;
  for (const auto& l : lanes)
    out += (out.empty() ? "" : " ") + l.name + "(" + fabric::format_ipv4(l.ipv4) + "/" +
           std::to_string(l.prefix) + ")";
  return out.empty() ? "none" : out;
}

std::string names(const std::vector<fabric::Lane>& lanes, const std::string& prefix) {
  std::string out;
  for (const auto& l : lanes) out += (out.empty() ? "" : ",") + prefix + l.name;
  return out.empty() ? "-" : out;
}

std::string key_ep(int peer, int index) {
  return "spark.doctor.ep." + std::to_string(peer) + "." + std::to_string(index);
}

int probe(const ProbeOptions& o, const config::Config& cfg, bootstrap::Bootstrap* boot,
          std::vector<JobRow>& rows);

// Offsets of the streams' hello numbers: a stream's hello never matches a round trip's, a
// striped stream's connections (64 lane pairs at most) never a single stream's.
constexpr int kStreamHello = 1 << 20;
constexpr int kStripeHello = 1 << 24;

// What each rank publishes of its lanes' interfaces: the netdev and MTU of every tcp lane
// (the lane is the netdev) and of every RDMA lane (its GID's netdev).
struct LaneNetdevs {
  std::vector<std::string> tcp, rdma;
  std::vector<int> tcp_mtu, rdma_mtu;
};

const std::vector<fabric::Lane>& lanes_of(const RankLanes& r, LinkKind kind) {
  return kind == LinkKind::rdma ? r.rdma : r.tcp;
}

// (netdev, MTU) of rank r's lane `lane` of `kind`.
std::pair<std::string, int> netdev_of(const std::vector<LaneNetdevs>& nets, int r, LinkKind kind,
                                      int lane) {
  const auto& n = nets[static_cast<std::size_t>(r)];
  const auto& names = kind == LinkKind::rdma ? n.rdma : n.tcp;
  const auto& mtus = kind == LinkKind::rdma ? n.rdma_mtu : n.tcp_mtu;
  const auto i = static_cast<std::size_t>(lane);
  return {i < names.size() ? names[i] : "", i < mtus.size() ? mtus[i] : 0};
}

// "rxe0->rxe1" / "tcp:to1->to0", in the stream's direction.
std::string stream_lane(const std::vector<RankLanes>& ranks, const Stream& st) {
  std::string out;
  for (const auto& [la, lb] : st.pairs()) {
    const std::string x =
        lanes_of(ranks[static_cast<std::size_t>(st.a)], st.kind)[static_cast<std::size_t>(la)].name;
    const std::string y =
        lanes_of(ranks[static_cast<std::size_t>(st.b)], st.kind)[static_cast<std::size_t>(lb)].name;
    const std::string pfx = st.kind == LinkKind::tcp ? "tcp:" : "";
    out += (out.empty() ? "" : "+") + (st.a_sends ? pfx + x + "->" + y : pfx + y + "->" + x);
  }
  return out;
}

#ifdef SPARK_DOCTOR_HAVE_VERBS
// The RDMA streams' queue pairs, one per lane pair of each stream this rank is in (key: the
// stream's number and the pair's), connected through the bootstrap; a failure is the stream's
// error at this end.
struct RdmaStreams {
  std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<RdmaStream>> qps;
  std::map<std::size_t, std::string> errors;
};

RdmaStreams connect_rdma_streams(const ProbeOptions& o, const std::vector<Stream>& streams,
                                 RdmaSetup& rdma, bootstrap::Bootstrap* boot, int rank,
                                 milliseconds fence_timeout) {
  RdmaStreams out;
  auto key = [](std::size_t u, std::size_t i) {
    return "spark.doctor.stream." + std::to_string(u) + "." + std::to_string(i);
  };
  for (std::size_t u = 0; u < streams.size(); ++u) {
    const Stream& st = streams[u];
    if (st.kind != LinkKind::rdma || (st.a != rank && st.b != rank)) continue;
    const auto pairs = st.pairs();
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const int mine = st.a == rank ? pairs[i].first : pairs[i].second;
      std::string value;
      try {
        auto q = std::make_unique<RdmaStream>(*rdma.lanes[static_cast<std::size_t>(mine)],
                                              static_cast<std::uint32_t>(o.timeout_ms),
                                              (1ull << 40) + (u << 8) + i);
        auto ep = q->endpoint();
        value.assign(reinterpret_cast<const char*>(ep.data()), ep.size());
        out.qps[{u, i}] = std::move(q);
      } catch (const std::exception& e) {
        out.errors[u] = e.what();
        value = std::string("ERR:") + e.what();
      }
      boot->put(key(u, i), as_bytes(value));
    }
  }
  boot->commit();
  boot->fence(fence_timeout);
  for (auto& [k, q] : out.qps) {
    const Stream& st = streams[k.first];
    const int peer = st.a == rank ? st.b : st.a;
    const auto remote = to_string(boot->get(peer, key(k.first, k.second)));
    try {
      if (remote.rfind("ERR:", 0) == 0)
        throw Error("the peer could not set up its end: " + remote.substr(4));
      q->connect(as_bytes(remote), peer);
    } catch (const std::exception& e) {
      out.errors[k.first] = e.what();
    }
  }
  boot->fence(fence_timeout);  // every stream's QP is at RTS before the first write
  return out;
}
#endif

// --bandwidth: this rank's part of every stream, in the global order, stream u within
// [start + u x window, start + (u + 1) x window) (the round trips' scheme: no fence between
// streams, a silent peer costs its window and no more). tcp streams connect with the test's
// hello; RDMA streams use the queue pairs set up before.
struct StreamContext {
  const std::vector<RankLanes>& ranks;
  const std::vector<LaneNetdevs>& nets;
  const std::vector<fabric::Lane>& tcp_lanes;
  const std::vector<net::Listener>& listeners;
  const std::vector<std::vector<int>>& tcp_ports;
  const net::hello::Token& token;
  int rank, size;
};

// One tcp stream on the lane pair la -> lb: the initiator (the lower rank) connects with the
// test's hello (`hello_index`), then one end sends and the other receives.
StreamEnd tcp_stream(const ProbeOptions& o, const Stream& st, int la, int lb, int test,
                     int hello_index, const StreamContext& c, bool sending,
                     const std::string& netdev, milliseconds seconds,
                     std::chrono::steady_clock::time_point deadline) {
  const TripHello hello{c.token, c.size, st.a, st.b, hello_index};
  const bool initiator = st.a == c.rank;
  const auto& lane = c.tcp_lanes[static_cast<std::size_t>(initiator ? la : lb)];
  std::string why;
  net::Fd fd;
  if (initiator) {
    const auto& to = c.ranks[static_cast<std::size_t>(st.b)].tcp[static_cast<std::size_t>(lb)];
    fd = connect_with_hello(
        lane, to.ipv4, c.tcp_ports[static_cast<std::size_t>(st.b)][static_cast<std::size_t>(lb)],
        hello, deadline, why);
  } else {
    fd = accept_with_hello(c.listeners[static_cast<std::size_t>(lb)], hello, deadline, why);
  }
  if (fd)
    return sending ? stream_send(fd.get(), test, o.sysfs, netdev, seconds, deadline)
                   : stream_receive(fd.get(), test, o.sysfs, netdev, deadline);
  StreamEnd e;
  e.test = test;
  e.sender = sending;
  e.netdev = netdev;
  e.error = why;
  return e;
}

// This rank's end of stream u: one lane pair, or every pair of a striped stream at once (a
// thread per pair beyond the first), combined.
template <class RdmaQps>
StreamEnd run_stream(const ProbeOptions& o, const Stream& st, std::size_t u, const StreamContext& c,
                     RdmaQps* rdma, milliseconds seconds,
                     std::chrono::steady_clock::time_point deadline) {
  const bool sending = (st.a == c.rank) == st.a_sends;
  const int test = static_cast<int>(u);
  const auto pairs = st.pairs();
  auto one = [&](std::size_t i) {
    const auto [la, lb] = pairs[i];
    const std::string netdev = netdev_of(c.nets, c.rank, st.kind, st.a == c.rank ? la : lb).first;
    StreamEnd e;
    e.test = test;
    e.sender = sending;
    e.netdev = netdev;
    if (st.kind == LinkKind::tcp) {
      // A striped stream's connections get hellos of their own (lane pair i).
      const int hello = st.stripe.empty() ? kStreamHello + test : kStripeHello + test * 64 + int(i);
      return tcp_stream(o, st, la, lb, test, hello, c, sending, netdev, seconds, deadline);
    }
#ifdef SPARK_DOCTOR_HAVE_VERBS
    if (auto err = rdma->errors.find(u); err != rdma->errors.end()) {
      e.error = err->second;
      return e;
    }
    auto& q = *rdma->qps.at({u, i});
    return sending ? q.send(test, o.sysfs, netdev, seconds, deadline)
                   : q.receive(test, o.sysfs, netdev, deadline);
#else
    (void)rdma;
    e.error = "this build has no RDMA";
    return e;
#endif
  };
  if (pairs.size() == 1) return one(0);
  std::vector<StreamEnd> ends(pairs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < pairs.size(); ++i) threads.emplace_back([&, i] { ends[i] = one(i); });
  ends[0] = one(0);
  for (auto& t : threads) t.join();
  return combine_ends(ends);
}

template <class RdmaQps>
std::vector<StreamEnd> run_streams(const ProbeOptions& o, const std::vector<Stream>& streams,
                                   const StreamContext& c, RdmaQps* rdma,
                                   std::chrono::steady_clock::time_point& window_end) {
  const milliseconds seconds(1000LL * o.seconds);
  const milliseconds window = seconds + milliseconds(1000);
  const auto start = std::chrono::steady_clock::now();
  std::vector<StreamEnd> ends;
  for (std::size_t u = 0; u < streams.size(); ++u) {
    const Stream& st = streams[u];
    if (st.a != c.rank && st.b != c.rank) continue;
    const auto deadline = start + window * static_cast<int>(u + 1);
    StreamEnd e = run_stream(o, st, u, c, rdma, seconds, deadline);
#ifdef SPARK_DOCTOR_HAVE_VERBS
    // Flushed (RdmaStream::send): nothing of the stream's queue pairs outlives its window.
    if (st.kind == LinkKind::rdma)
      for (std::size_t i = 0; i < st.pairs().size(); ++i) rdma->qps.erase({u, i});
#endif
    if (log::enabled(log::Level::info, "doctor"))
      log::line("doctor", "stream " + std::to_string(u) + " " + stream_lane(c.ranks, st) + ": " +
                              (e.sender ? "sent " : "received ") + std::to_string(e.payload) +
                              " bytes" + (e.error.empty() ? "" : " (" + e.error + ")") +
                              ", ended " +
                              std::to_string(std::chrono::duration_cast<milliseconds>(
                                                 deadline - std::chrono::steady_clock::now())
                                                 .count()) +
                              " ms before its window's end");
    ends.push_back(std::move(e));
  }
  window_end = start + window * static_cast<int>(streams.size());
  return ends;
}

// Rank 0: every stream judged from its two ends (a missing end: that rank never reported it).
std::vector<CableResult> judge_streams(const BandwidthLimits& limits,
                                       const std::vector<Stream>& streams,
                                       const std::vector<RankLanes>& ranks,
                                       const std::vector<StreamEnd>& ends) {
  std::vector<StreamEnd> tx(streams.size()), rx(streams.size());
  for (std::size_t u = 0; u < streams.size(); ++u) {
    tx[u].error = rx[u].error = "no report from this end";
    tx[u].sender = true;
  }
  for (const StreamEnd& e : ends)
    if (e.test >= 0 && static_cast<std::size_t>(e.test) < streams.size())
      (e.sender ? tx : rx)[static_cast<std::size_t>(e.test)] = e;
  double fastest = 0;
  for (std::size_t u = 0; u < streams.size(); ++u)
    if (streams[u].stripe.empty() && tx[u].error.empty() && rx[u].error.empty())
      fastest = std::max(fastest, measured(tx[u], rx[u]).gbps());
  std::vector<CableResult> out;
  for (std::size_t u = 0; u < streams.size(); ++u) {
    const Stream& st = streams[u];
    const int from = st.a_sends ? st.a : st.b, to = st.a_sends ? st.b : st.a;
    std::optional<std::pair<double, std::string>> sum;
    if (!st.stripe.empty()) {
      double gbps = 0;
      for (std::size_t v = 0; v < streams.size(); ++v) {
        const Stream& one = streams[v];
        if (one.stripe.empty() && one.a == st.a && one.b == st.b && one.a_sends == st.a_sends &&
            std::find(st.stripe.begin(), st.stripe.end(), std::pair{one.la, one.lb}) !=
                st.stripe.end())
          gbps += measured(tx[v], rx[v]).gbps();
      }
      sum = {gbps, "the sum of its lanes' own streams"};
    }
    out.push_back(judge_stream(rank_label(from, ranks[static_cast<std::size_t>(from)].host),
                               rank_label(to, ranks[static_cast<std::size_t>(to)].host),
                               stream_lane(ranks, st), tx[u], rx[u], limits, fastest,
                               sum ? &*sum : nullptr));
  }
  return out;
}

// One "path MTU" row per cable (the first ranks of two hosts, a lane pair on one subnet):
// both ends' interface MTU; a mismatch fails naming both (a frame the larger end sends is
// dropped by the smaller: RoCE shows it later as IBV_WC_RETRY_EXC_ERR, tcp as stalls).
std::vector<JobRow> mtu_rows(const std::vector<Stream>& streams,
                             const std::vector<RankLanes>& ranks,
                             const std::vector<LaneNetdevs>& nets) {
  std::vector<JobRow> rows;
  for (const Stream& st : streams) {
    if (!st.a_sends || !st.stripe.empty()) continue;
    const auto& ra = ranks[static_cast<std::size_t>(st.a)];
    const auto& rb = ranks[static_cast<std::size_t>(st.b)];
    const auto [na, ma] = netdev_of(nets, st.a, st.kind, st.la);
    const auto [nb, mb] = netdev_of(nets, st.b, st.kind, st.lb);
    JobRow r{ra.host,    st.a, "path MTU", stream_lane(ranks, st), rank_label(st.b, rb.host),
             Status::ok, -1,   ""};
    if (ma == 0 || mb == 0) {
      r.status = Status::info;
      r.detail = "MTU unknown on " + (ma == 0 ? ra.host + " " + na : rb.host + " " + nb);
    } else if (ma != mb) {
      r.status = Status::fail;
      r.detail = "MTU differs: " + ra.host + " " + na + " " + std::to_string(ma) + ", " + rb.host +
                 " " + nb + " " + std::to_string(mb) + ": set both ends to the same value (ip " +
                 "link set DEV mtu " + std::to_string(std::max(ma, mb)) + ")";
    } else {
      r.detail = std::to_string(ma) + " on both ends (" + ra.host + " " + na + ", " + rb.host +
                 " " + nb + ")";
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

// This rank's facts for the job's RoCE choice, as the wire-up publishes them; a value the job
// would refuse is a FAIL row (and no lanes).
fabric::RoceFacts roce_facts(const ProbeOptions& o, const config::Config& cfg,
                             const std::string& host, int rank, std::vector<JobRow>& rows) {
  try {
    return fabric::local_roce_facts(cfg.value("SPARK_IB_HCA"),
                                    cfg.value("SPARK_DATA_NET").value_or(""),
                                    cfg.value("SPARK_LANES"), o.sysfs + "/class/infiniband");
  } catch (const std::exception& e) {
    rows.push_back({host, rank, "roce lanes", "-", "-", Status::fail, -1, e.what()});
    return {};
  }
}

// Per pair of ranks on different nodes, what SPARK_TRANSPORT=auto would choose (the same
// function as the job's wire-up and `sparkrun fabric`): roce direct or relayed (ok), or tcp
// with the reason (info: the job runs, without RDMA between them). None when no node has an
// RDMA lane (the lanes rows say so).
std::vector<JobRow> roce_rows(const fabric::RoceJob& job, int size) {
  std::vector<JobRow> rows;
  if (std::all_of(job.lanes.begin(), job.lanes.end(), [](const auto& l) { return l.empty(); }))
    return rows;
  for (int a = 0; a < size; ++a)
    for (int b = 0; b < size; ++b) {
      const auto na = job.node_of[static_cast<std::size_t>(a)];
      const auto nb = job.node_of[static_cast<std::size_t>(b)];
      if (na == nb) continue;
      const auto choice = job.peer(a, b);
      rows.push_back({job.hosts[static_cast<std::size_t>(na)], a, "roce lanes", "-",
                      rank_label(b, job.hosts[static_cast<std::size_t>(nb)]),
                      choice.kind == fabric::RocePeer::Kind::tcp ? Status::info : Status::ok, -1,
                      job.describe(a, b, choice)});
    }
  return rows;
}

int run(int argc, char** argv) {
  const ProbeOptions o = parse_args(argc, argv);
  if (o.host_checks) {
    const auto rows = evaluate(gather(o.sysfs), o.expect_mtu);
    if (o.json) {
      char name[256] = {};
      ::gethostname(name, sizeof name - 1);
      std::vector<JobRow> job;
      for (const Row& r : rows) job.push_back(host_row(name, -1, r));
      std::cout << json_report({"host", 0}, job, {}) << std::flush;
    } else {
      std::cout << render(rows) << std::flush;
    }
    return verdict(rows).probe_status();
  }
  const auto cfg = config::Config::from_environment();
  log::configure(cfg);
  auto boot = bootstrap::make_bootstrap(cfg);
  log::set_host(boot->node_id());
  log::set_rank(boot->rank());
  std::vector<JobRow> rows;
  try {
    return probe(o, cfg, boot.get(), rows);
  } catch (const std::exception& e) {
    // A rank that died or stopped, or a fence that timed out: rank 0 shows what it has and
    // the reason as a FAIL row; the group abort ends every rank (never a hang).
    const std::string msg = "rank " + std::to_string(boot->rank()) + ": doctor: " + e.what();
    if (boot->rank() == 0) {
      rows.push_back({boot->node_id(), 0, "job", "-", "-", Status::fail, -1, e.what()});
      std::cout << (o.json
                        ? json_report({o.bandwidth ? "bandwidth" : "job", boot->size()}, rows, {})
                        : render_job(rows))
                << std::flush;
    } else if (dynamic_cast<const BootstrapError*>(&e) != nullptr) {
      // A fence timed out: the PMIx server times it out for every rank at once, and rank 0's
      // table must come out before another rank's abort stops the job (rank 0's abort ends
      // this rank; when rank 0 is the one that hangs, this abort ends the job 2 s later).
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    boot->abort(protocol::doctor_exit::probe_failures, msg);
  }
  return protocol::doctor_exit::probe_failures;
}

int probe(const ProbeOptions& o, const config::Config& cfg, bootstrap::Bootstrap* boot,
          std::vector<JobRow>& rows) {
  const int rank = boot->rank(), size = boot->size();
  const std::string host = boot->node_id();
  const milliseconds probe_timeout(o.timeout_ms);
  // SPARKNET_ROCE_TIMEOUT_MS (default 10 s) bounds each fence beyond the tests' own time.
  const milliseconds fence_timeout(cfg.timeout_ms() + static_cast<std::uint32_t>(o.timeout_ms));
  int silent = -1;
  if (auto s = cfg.value("SPARK_DOCTOR_TEST_SILENT_RANK"); s && !s->empty())
    silent = parse_int(*s, 0, 1 << 20, "SPARK_DOCTOR_TEST_SILENT_RANK");

  // Each rank's lanes. tcp: SPARK_DATA_NET's interfaces, else every up IPv4 interface; when a
  // host has none, loopback (ranks of one host can still reach each other).
  const CommOptions opts = CommOptions::from_config(cfg);
  RdmaSetup rdma = open_rdma(o, opts, host, rank, rows);
  auto tcp_lanes = fabric::local_lanes(fabric::parse_nets(opts.data_net, "SPARK_DATA_NET"));
  if (tcp_lanes.empty()) tcp_lanes.push_back({"lo", 1, 0x7f000001u, 8});
  std::vector<net::Listener> listeners;
  std::vector<int> ports;
  const auto [first_port, last_port] = opts.tcp_ports;
  for (std::size_t i = 0; i < tcp_lanes.size();) {
    try {
      listeners.emplace_back(tcp_lanes[i].ipv4, "lane " + tcp_lanes[i].name, SOCK_NONBLOCK, 64,
                             net::PortRange{first_port, last_port});
    } catch (const std::exception& e) {  // e.g. an address still tentative: not a lane
      rows.push_back(
          {host, rank, "lanes", "tcp:" + tcp_lanes[i].name, "-", Status::warn, -1, e.what()});
      tcp_lanes.erase(tcp_lanes.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ports.push_back(listeners.back().port());
    ++i;
  }
  boot->put("spark.doctor.host", as_bytes(host));
  boot->put("spark.doctor.rdma", as_bytes(fabric::encode_lanes(rdma.published)));
  boot->put("spark.doctor.tcp", as_bytes(fabric::encode_lanes(tcp_lanes)));
  boot->put("spark.doctor.ports", as_bytes(fabric::encode_ports(ports)));
  {
    LaneNetdevs mine;
    for (const auto& l : tcp_lanes) {
      mine.tcp.push_back(l.name);
      mine.tcp_mtu.push_back(netdev_mtu(o.sysfs, l.name));
    }
#ifdef SPARK_DOCTOR_HAVE_VERBS
    for (const auto& l : rdma.lanes) {
      mine.rdma.push_back(rdma_netdev(o.sysfs, l->name, l->port, l->gid.index));
      mine.rdma_mtu.push_back(netdev_mtu(o.sysfs, mine.rdma.back()));
    }
#endif
    auto names = [](const std::vector<std::string>& v) {
      std::string out;
      for (const auto& n : v) out += (out.empty() ? "" : ",") + (n.empty() ? "?" : n);
      return out;
    };
    boot->put("spark.doctor.netdevs.tcp", as_bytes(names(mine.tcp)));
    boot->put("spark.doctor.netdevs.rdma", as_bytes(names(mine.rdma)));
    boot->put("spark.doctor.mtu.tcp", as_bytes(fabric::encode_ports(mine.tcp_mtu)));
    boot->put("spark.doctor.mtu.rdma", as_bytes(fabric::encode_ports(mine.rdma_mtu)));
  }
  const auto facts = roce_facts(o, cfg, host, rank, rows);
  boot->put("spark.doctor.roce.lanes", as_bytes(facts.lanes));
  boot->put("spark.doctor.roce.prefer", as_bytes(facts.prefer));
  bootstrap::publish_job_token(*boot);
  boot->commit();
  boot->fence(fence_timeout);
  const auto token = bootstrap::job_token(*boot);

  std::vector<RankLanes> ranks(static_cast<std::size_t>(size));
  std::vector<std::vector<int>> tcp_ports(static_cast<std::size_t>(size));
  std::vector<LaneNetdevs> nets(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    auto& rl = ranks[static_cast<std::size_t>(r)];
    rl.host = to_string(boot->get(r, "spark.doctor.host"));
    rl.rdma = fabric::decode_lanes(to_string(boot->get(r, "spark.doctor.rdma")));
    rl.tcp = fabric::decode_lanes(to_string(boot->get(r, "spark.doctor.tcp")));
    tcp_ports[static_cast<std::size_t>(r)] =
        fabric::decode_ports(to_string(boot->get(r, "spark.doctor.ports")), rank_label(r, rl.host));
    auto& n = nets[static_cast<std::size_t>(r)];
    for (const char* kind : {"tcp", "rdma"}) {
      const bool tcp = std::string_view(kind) == "tcp";
      auto& names = tcp ? n.tcp : n.rdma;
      const auto text = to_string(boot->get(r, std::string("spark.doctor.netdevs.") + kind));
      if (!text.empty())
        for (const auto name : fabric::split(text, ','))
          names.emplace_back(name == "?" ? "" : name);
      (tcp ? n.tcp_mtu : n.rdma_mtu) = fabric::decode_mtus(
          to_string(boot->get(r, std::string("spark.doctor.mtu.") + kind)), rank_label(r, rl.host));
    }
  }

  // Host checks, once per host (its first rank).
  int first_on_host = rank;
  for (int r = 0; r < rank; ++r)
    if (ranks[static_cast<std::size_t>(r)].host == host) {
      first_on_host = r;
      break;
    }
  if (first_on_host == rank) {
    std::vector<JobRow> host_rows;
    for (const Row& r : evaluate(gather(o.sysfs), o.expect_mtu))
      host_rows.push_back(host_row(host, rank, r));
    rows.insert(rows.begin(), host_rows.begin(), host_rows.end());
  }
  rows.push_back({host, rank, "lanes", names(rdma.published, ""), "-",
                  rdma.published.empty() ? Status::info : Status::ok, -1,
                  rdma.published.empty()
                      ? "no RDMA lane: round trips run over tcp: " + describe_lanes(tcp_lanes)
                      : "RDMA (" + rdma.source + "): " + describe_lanes(rdma.published)});

  const std::vector<Link> links = plan_links(ranks);
  // RDMA links: one RC queue pair per link end, endpoints through the bootstrap.
  std::map<std::pair<int, int>, std::string> setup_error;  // (peer, index) -> error
  // Errors the initiator learns through the bootstrap (either end failed to create its QP):
  // the initiator's row reports them; a responder adds a row only for what it alone saw.
  std::set<std::pair<int, int>> shared_error;
#ifdef SPARK_DOCTOR_HAVE_VERBS
  std::map<std::pair<int, int>, std::unique_ptr<RdmaLink>> rlinks;
  std::uint64_t wr = 1;
  for (const Link& l : links) {
    if (l.kind != LinkKind::rdma || (l.a != rank && l.b != rank)) continue;
    const int peer = l.a == rank ? l.b : l.a;
    const int mine = l.a == rank ? l.la : l.lb;
    std::string value;
    try {
      auto link = std::make_unique<RdmaLink>(*rdma.lanes[static_cast<std::size_t>(mine)],
                                             static_cast<std::uint32_t>(o.timeout_ms), wr++);
      auto ep = link->endpoint();
      value.assign(reinterpret_cast<const char*>(ep.data()), ep.size());
      rlinks[{peer, l.index}] = std::move(link);
    } catch (const std::exception& e) {
      setup_error[{peer, l.index}] = e.what();
      shared_error.insert({peer, l.index});
      value = std::string("ERR:") + e.what();
    }
    boot->put(key_ep(peer, l.index), as_bytes(value));
  }
  boot->commit();
  boot->fence(fence_timeout);
  for (auto& [k, link] : rlinks) {
    auto remote = to_string(boot->get(k.first, key_ep(rank, k.second)));
    try {
      if (remote.rfind("ERR:", 0) == 0) {
        shared_error.insert(k);
        throw Error(rank_label(k.first, ranks[static_cast<std::size_t>(k.first)].host) +
                    " could not set up its end: " + remote.substr(4));
      }
      link->connect(as_bytes(remote), k.first);
    } catch (const std::exception& e) {
      setup_error[k] = e.what();
    }
  }
  boot->fence(fence_timeout);  // every QP is at RTS before the first write
#endif

  if (auto s = cfg.value("SPARK_DOCTOR_TEST_STOP_RANK"); s && !s->empty())
    if (parse_int(*s, 0, 1 << 20, "SPARK_DOCTOR_TEST_STOP_RANK") == rank) ::raise(SIGSTOP);

  // Every link gets a number t in one global order (rounds of pairs in which no rank appears
  // twice, then the pair's lane pairs); each rank runs its own links in that order, the lower
  // rank initiating. Test t must end by T0 + (t + 1) x probe timeout on both sides: a rank
  // reaches test t only after its earlier tests, each done by its own window, so the two sides
  // always share at least one full probe timeout, nothing waits unboundedly, and no fence is
  // needed between tests (a hung rank shows as FAIL rows naming it, not only a fence timeout).
  std::vector<fabric::Triple> passed;  // (a, b, link index) of every round trip that passed
  const auto t0 = std::chrono::steady_clock::now();
  int t = -1;
  for (const auto& round : plan_rounds(size)) {
    for (auto [a, b] : round) {
      for (const Link& l : links) {
        if (l.a != a || l.b != b) continue;
        ++t;
        if (a != rank && b != rank) continue;
        const int peer = a == rank ? b : a;
        const auto& pr = ranks[static_cast<std::size_t>(peer)];
        const auto window = std::max(
            milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                 t0 + probe_timeout * (t + 1) - std::chrono::steady_clock::now()));
        // "rxe0->rxe1" / "tcp:eth0->eth0"
        const auto& rb = ranks[static_cast<std::size_t>(b)];
        const std::string lane =
            lane_label(ranks[static_cast<std::size_t>(a)], l.kind, l.la) + "->" +
            (l.kind == LinkKind::rdma ? rb.rdma : rb.tcp)[static_cast<std::size_t>(l.lb)].name;
        const std::string who = rank_label(peer, pr.host) + " on lane " + lane;
        auto err = setup_error.find({peer, l.index});
        if (rank == b) {  // responder
          if (rank == silent || err != setup_error.end()) {
            if (err != setup_error.end() && !shared_error.count(err->first))
              rows.push_back({host, rank, "rdma write", lane, rank_label(a, pr.host), Status::fail,
                              -1, err->second});
            continue;
          }
          if (l.kind == LinkKind::tcp)
            tcp_respond(listeners[static_cast<std::size_t>(l.lb)], o.iters,
                        {token, size, a, b, l.index}, window);
#ifdef SPARK_DOCTOR_HAVE_VERBS
          else
            rlinks.at({peer, l.index})->respond(o.iters, window);
#endif
          continue;
        }
        TripResult res;
        if (err != setup_error.end()) {
          res.error = err->second;
        } else if (l.kind == LinkKind::tcp) {
          const auto& to = pr.tcp[static_cast<std::size_t>(l.lb)];
          res = tcp_initiate(
              tcp_lanes[static_cast<std::size_t>(l.la)], to.ipv4,
              tcp_ports[static_cast<std::size_t>(peer)][static_cast<std::size_t>(l.lb)], o.iters,
              {token, size, a, b, l.index}, window, who);
        } else {
#ifdef SPARK_DOCTOR_HAVE_VERBS
          res = rlinks.at({peer, l.index})->initiate(o.iters, window, who);
#endif
        }
        JobRow row{host,
                   rank,
                   l.kind == LinkKind::rdma ? "rdma write" : "tcp round trip",
                   lane,
                   rank_label(peer, pr.host),
                   res.error.empty() ? Status::ok : Status::fail,
                   res.error.empty() ? res.median_us : -1,
                   res.error};
        if (res.error.empty()) {
          row.detail = "median of " + std::to_string(res.done) + " round trips (min " +
                       format_latency(res.min_us) + ", max " + format_latency(res.max_us) + ")";
          passed.push_back({l.a, l.b, l.index});
        }
        rows.push_back(std::move(row));
      }
    }
  }

  // Until the last window has closed (the slowest rank's last test), then the usual margin.
  auto window_end = t0 + probe_timeout * (t + 1);
  const auto streams = plan_streams(ranks);
  std::vector<StreamEnd> stream_ends;
  if (o.bandwidth && !streams.empty()) {
    // Every round trip is done before the first stream, which would distort their timing.
    boot->fence(fence_timeout + std::chrono::duration_cast<milliseconds>(
                                    window_end - std::chrono::steady_clock::now()));
    const StreamContext ctx{ranks, nets, tcp_lanes, listeners, tcp_ports, token, rank, size};
#ifdef SPARK_DOCTOR_HAVE_VERBS
    auto qps = connect_rdma_streams(o, streams, rdma, boot, rank, fence_timeout);
    stream_ends = run_streams(o, streams, ctx, &qps, window_end);
#else
    stream_ends = run_streams(o, streams, ctx, static_cast<int*>(nullptr), window_end);
#endif
  }
  boot->put("spark.doctor.rows", as_bytes(encode_rows(rows)));
  boot->put("spark.doctor.passed", as_bytes(fabric::encode_triples(passed)));
  boot->put("spark.doctor.streams", as_bytes(encode_stream_ends(stream_ends)));
  boot->commit();
  boot->fence(fence_timeout + std::chrono::duration_cast<milliseconds>(
                                  window_end - std::chrono::steady_clock::now()));
  int code = 0;
  if (rank == 0) {
    std::vector<JobRow> all = mtu_rows(streams, ranks, nets);
    std::set<std::tuple<int, int, int>> ok;
    std::vector<StreamEnd> ends;
    for (int r = 0; r < size; ++r) {
      auto more = decode_rows(to_string(boot->get(r, "spark.doctor.rows")));
      all.insert(all.end(), more.begin(), more.end());
      auto e = decode_stream_ends(to_string(boot->get(r, "spark.doctor.streams")));
      ends.insert(ends.end(), e.begin(), e.end());
      for (const auto& [a, b, idx] :
           fabric::decode_triples(to_string(boot->get(r, "spark.doctor.passed"))))
        ok.insert({a, b, idx});
    }
    std::vector<Link> good;
    for (const Link& l : links)
      if (ok.count({l.a, l.b, l.index})) good.push_back(l);
    if (size > 1) {
      auto reach = reach_rows(ranks, rank_map(ranks, good));
      all.insert(all.end(), reach.begin(), reach.end());
      std::vector<std::string> hosts, lanes, prefer;
      for (int r = 0; r < size; ++r) {
        hosts.push_back(ranks[static_cast<std::size_t>(r)].host);
        lanes.push_back(to_string(boot->get(r, "spark.doctor.roce.lanes")));
        prefer.push_back(to_string(boot->get(r, "spark.doctor.roce.prefer")));
      }
      auto roce = roce_rows(fabric::make_roce_job(hosts, lanes, prefer), size);
      all.insert(all.end(), roce.begin(), roce.end());
    }
    // Sections: host checks, lanes, round trips, reach (stable within each).
    std::vector<CableResult> cables;
    if (o.bandwidth) {
      cables = judge_streams(o.limits, streams, ranks, ends);
      if (streams.empty())
        all.push_back({host, 0, "bandwidth", "-", "-", Status::info, -1,
                       "no cable to qualify: every rank is on one host, or no two hosts share a "
                       "subnet"});
      for (std::size_t i = 0; i < cables.size(); ++i) {
        const int from = streams[i].a_sends ? streams[i].a : streams[i].b;
        all.push_back(cable_row(ranks[static_cast<std::size_t>(from)].host, from, cables[i]));
      }
    }
    auto section = [](const JobRow& r) {
      if (r.check == "lanes") return 1;
      if (r.check == "rdma write" || r.check == "tcp round trip" || r.check == "path MTU") return 2;
      if (r.check == "reach" || r.check == "roce lanes") return 3;
      if (r.check == "bandwidth") return 4;
      return 0;
    };
    std::stable_sort(all.begin(), all.end(),
                     [&](const JobRow& x, const JobRow& y) { return section(x) < section(y); });
    if (o.json) {
      std::cout << json_report({o.bandwidth ? "bandwidth" : "job", size}, all, cables);
    } else {
      std::cout << "sparkrun doctor: " << size << " rank(s), " << links.size() << " link(s)"
                << (links.empty() ? ""
                                  : ", round trips of " + std::to_string(o.iters) + " x 8 bytes")
                << (o.bandwidth ? ", streams of " + std::to_string(o.seconds) + " s each way" : "")
                << "\n"
                << cable_summary(cables) << render_job(all);
    }
    std::cout << std::flush;
    code = verdict(all).probe_status();
  }
  boot->fence(fence_timeout);  // rank 0 has read everything before anyone leaves
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // before any check ran (options, the bootstrap)
    std::cerr << "spark_doctor_probe: " << e.what() << "\n";
    return spark::protocol::doctor_exit::could_not_run;
  }
}
