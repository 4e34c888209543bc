#include "flight_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>

namespace spark::launch {

namespace flight = protocol::flight;
using nlohmann::json;

namespace {

std::int64_t mono_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string text(const char* field, std::size_t n) {
  return std::string(field, ::strnlen(field, n));
}

std::string human_bytes(std::uint64_t b) {
  char buf[32];
  if (b < 1024)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  else if (b < (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else if (b < (1u << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  return buf;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f s" : "%.1f s", s);
  return buf;
}

std::string comm_name(const RankFlight& f, const flight::Entry& e) {
  return e.comm < f.comms.size() ? f.comms[e.comm] : "comm #" + std::to_string(e.comm);
}

std::string op_name(const RankFlight& f, const flight::Entry& e) {
  return e.op < f.ops.size() ? f.ops[e.op] : "op #" + std::to_string(e.op);
}

}  // namespace

std::optional<RankFlight> read_flight(const std::string& job_id, int rank) {
  const std::string name = flight::segment_name(job_id, rank);
  const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  void* mem = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= sizeof(flight::Header))
    mem = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED) return std::nullopt;
  const auto size = static_cast<std::size_t>(st.st_size);
  const auto* h = static_cast<const flight::Header*>(mem);
  std::optional<RankFlight> out;
  if (std::memcmp(h->magic, flight::kMagic, sizeof flight::kMagic) == 0 &&
      flight::segment_bytes(h->capacity) <= size) {
    RankFlight f;
    f.rank = h->rank;
    f.pid = h->pid;
    f.read_ns = mono_now_ns();
    f.begun = h->begun.load(std::memory_order_acquire);
    f.completed = h->completed.load(std::memory_order_relaxed);
    f.bytes_done = h->bytes_done.load(std::memory_order_relaxed);
    for (const auto& b : h->wait_buckets)
      f.wait_buckets.push_back(b.load(std::memory_order_relaxed));
    f.wait_sum_ns = h->wait_sum_ns.load(std::memory_order_relaxed);
    const std::uint32_t comms = std::min<std::uint32_t>(h->comm_count, flight::kMaxComms);
    for (std::uint32_t i = 0; i < comms; ++i) f.comms.push_back(text(h->comms[i], 40));
    const std::uint32_t ops = std::min<std::uint32_t>(h->op_count, flight::kMaxOps);
    for (std::uint32_t i = 0; i < flight::kMaxOps; ++i)
      if (i < ops || h->ops[i][0] != 0) f.ops.push_back(text(h->ops[i], 16));
    const std::uint32_t lanes =
        std::min(h->lane_count.load(std::memory_order_acquire), flight::kMaxLanes);
    for (std::uint32_t i = 0; i < lanes; ++i) {
      const flight::LaneRow& row = flight::lane_rows(h)[i];
      f.lanes.push_back({row.peer, row.index, text(row.name, sizeof row.name),
                         row.bytes.load(std::memory_order_relaxed),
                         row.blocked_ns.load(std::memory_order_relaxed),
                         row.busy_ns.load(std::memory_order_relaxed)});
    }
    const std::uint64_t n = std::min<std::uint64_t>(f.begun, h->capacity);
    for (std::uint64_t i = f.begun - n; i < f.begun; ++i) {
      RankFlight::Op op;
      char lane[flight::kLaneBytes];
      // A slot the rank is rewriting (or died rewriting) is left out.
      if (!flight::read_entry(h, i % h->capacity, op.e, lane)) continue;
      op.lane = lane;
      // Only a failure is written; the counter says whether the current one returned.
      op.state = op.e.failed                                 ? flight::State::failed
                 : i + 1 == f.begun && f.completed < f.begun ? flight::State::running
                                                             : flight::State::done;
      f.entries.push_back(std::move(op));
    }
    out = std::move(f);
  }
  ::munmap(mem, size);
  return out;
}

json entry_json(const RankFlight& f, const RankFlight::Op& op) {
  const flight::Entry& e = op.e;
  json j = json::object();
  j["op"] = op_name(f, e);
  j["comm"] = comm_name(f, e);
  j["seq"] = e.seq;
  j["bytes"] = e.bytes;
  j["peer"] = e.peer;
  j["state"] = flight::state_name(op.state);
  auto ago = [&](std::int64_t t) { return static_cast<double>(f.read_ns - t) / 1e9; };
  j["start_s_ago"] = e.start_ns ? json(ago(e.start_ns)) : json(nullptr);
  j["end_s_ago"] = e.end_ns ? json(ago(e.end_ns)) : json(nullptr);
  j["blocked_waits"] = e.waits;
  if (e.wait_ns != 0) {
    json w = json::object();
    w["what"] = flight::wait_name(e.wait_kind);
    w["peer"] = e.wait_peer;
    w["lane"] = op.lane;
    w["waiting"] = e.waiting != 0;
    w["began_s_ago"] = ago(e.wait_ns);
    w["seconds"] =
        e.waiting != 0 ? ago(e.wait_ns) : static_cast<double>(e.end_ns - e.wait_ns) / 1e9;
    j["wait"] = std::move(w);
  }
  return j;
}

json lanes_json(const RankFlight& f) {
  json lanes = json::array();
  for (const auto& l : f.lanes)
    lanes.push_back({{"peer", l.peer},
                     {"lane", l.name},
                     {"bytes_sent", l.bytes},
                     {"blocked_s", static_cast<double>(l.blocked_ns) / 1e9},
                     {"busy_s", static_cast<double>(l.busy_ns) / 1e9}});
  return lanes;
}

json flight_json(const RankFlight& f) {
  json j = json::object();
  j["rank"] = f.rank;
  j["pid"] = f.pid;
  j["operations_begun"] = f.begun;
  j["operations_completed"] = f.completed;
  j["bytes_completed"] = f.bytes_done;
  j["lanes"] = lanes_json(f);
  j["operations"] = json::array();
  for (const auto& op : f.entries) j["operations"].push_back(entry_json(f, op));
  return j;
}

std::string describe_entry(const RankFlight& f, const RankFlight::Op& op) {
  const flight::Entry& e = op.e;
  std::string s = op_name(f, e) + " seq " + std::to_string(e.seq);
  const std::string comm = comm_name(f, e);
  if (comm != "world") s += " (" + comm + ")";
  s += " " + human_bytes(e.bytes);
  if (e.peer >= 0) s += " peer " + std::to_string(e.peer);
  const auto since = [&](std::int64_t t) { return static_cast<double>(f.read_ns - t) / 1e9; };
  if (e.wait_ns != 0 && e.waiting != 0) {
    s += ": waiting " + seconds(since(e.wait_ns)) + " for " + flight::wait_name(e.wait_kind) +
         " rank " + std::to_string(e.wait_peer) + " on " + op.lane;
  } else {
    s += std::string(": ") + flight::state_name(op.state);
    if (e.wait_ns != 0)
      s += ", last blocked " + seconds(static_cast<double>(e.end_ns - e.wait_ns) / 1e9) + " for " +
           flight::wait_name(e.wait_kind) + " rank " + std::to_string(e.wait_peer) + " on " +
           op.lane;
  }
  return s;
}

std::vector<std::string> divergence_notes(const std::vector<RankFlight>& ranks) {
  std::vector<std::string> notes;
  // Per communicator name: each rank's last collective (seq, op). Send/recv have per-peer
  // sequence numbers and are left out.
  struct Last {
    int rank;
    std::uint64_t seq;
    std::string op;
    std::map<std::uint64_t, std::string> ops;  // seq -> op, every recorded one
  };
  std::map<std::string, std::vector<Last>> by_comm;
  for (const auto& f : ranks) {
    std::map<std::string, Last> mine;
    for (const auto& op : f.entries) {
      const flight::Entry& e = op.e;
      const std::string name = op_name(f, e);
      if (name == "send" || name == "recv") continue;
      Last& l = mine.try_emplace(comm_name(f, e), Last{f.rank, 0, "", {}}).first->second;
      l.seq = e.seq;
      l.op = name;
      l.ops[e.seq] = l.op;
    }
    for (auto& [comm, l] : mine) by_comm[comm].push_back(std::move(l));
  }
  for (const auto& [comm, lasts] : by_comm) {
    if (lasts.size() < 2) continue;
    std::uint64_t top = 0;
    for (const auto& l : lasts) top = std::max(top, l.seq);
    for (const auto& l : lasts) {
      if (l.seq < top)
        notes.push_back("rank " + std::to_string(l.rank) + " is behind on " + comm +
                        ": its last operation is " + l.op + " seq " + std::to_string(l.seq) +
                        ", other ranks reached seq " + std::to_string(top));
    }
    // The first seq at which the ranks' operations differ: the ranks in the minority diverged.
    std::set<std::uint64_t> seqs;
    for (const auto& l : lasts)
      for (const auto& [s, op] : l.ops) seqs.insert(s);
    for (const std::uint64_t s : seqs) {
      std::map<std::string, std::vector<int>> who;
      for (const auto& l : lasts)
        if (auto it = l.ops.find(s); it != l.ops.end()) who[it->second].push_back(l.rank);
      if (who.size() < 2) continue;
      std::string majority;
      std::size_t most = 0;
      for (const auto& [op, rs] : who)
        if (rs.size() > most) most = rs.size(), majority = op;
      for (const auto& [op, rs] : who) {
        if (op == majority) continue;
        for (const int r : rs)
          notes.push_back("rank " + std::to_string(r) + " diverged on " + comm + " at seq " +
                          std::to_string(s) + ": it called " + op + " where " +
                          std::to_string(most) + " other rank(s) called " + majority);
      }
      break;
    }
  }
  return notes;
}

}  // namespace spark::launch
