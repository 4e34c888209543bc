#include "control/messages.hpp"

#include <concepts>
#include <tuple>
#include <type_traits>

namespace spark::launch::control {
namespace {

constexpr std::uint32_t kMaxRanks = 1u << 20;

int checked_int(std::uint32_t v, std::uint32_t max, const char* what) {
  if (v > max)
    throw ProtocolError(std::string(what) + " " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

// The small messages' layouts, each written once for both directions: `io` is a Put (encode)
// or a Get (decode), and each of its calls writes or reads the next field. The checks a
// decoder makes beyond the layout (exit code ranges) follow in decode_*.
struct Put {
  Writer w;
  void u32(std::uint32_t v) { w.u32(v); }
  void i32(std::int32_t v) { w.i32(v); }
  void u64(std::uint64_t v) { w.u64(v); }
  void flag(bool v, const char*) { w.u8(v ? 1 : 0); }
  void bytes(const std::string& v, std::uint32_t) { w.bytes(v); }
  template <class A>
  void raw(const A& v) {
    w.raw(as_bytes(v));
  }
};
struct Get {
  Reader r;
  void u32(std::uint32_t& v) { v = r.u32(); }
  void i32(std::int32_t& v) { v = r.i32(); }
  void u64(std::uint64_t& v) { v = r.u64(); }
  void flag(bool& v, const char* what) {
    const std::uint8_t b = r.u8();
    if (b > 1) throw ProtocolError(std::string("bad ") + what);
    v = b == 1;
  }
  void bytes(std::string& v, std::uint32_t max) { v = r.bytes(max); }
  template <class A>
  void raw(A& v) {
    v = from_bytes<A>(r.raw(std::tuple_size_v<A>));
  }
};

// M is the message, const when encoding.
template <class M, class T>
concept Message = std::same_as<std::remove_const_t<M>, T>;

template <class Io>
void layout(Io& io, Message<Challenge> auto& m) {
  io.raw(m.nonce);
}
template <class Io>
void layout(Io& io, Message<Hello> auto& m) {
  io.u32(m.node);
  io.raw(m.nonce);
  io.raw(m.mac);
}
template <class Io>
void layout(Io& io, Message<Welcome> auto& m) {
  io.raw(m.mac);
}
template <class Io>
void layout(Io& io, Message<Fence> auto& m) {
  io.u64(m.seq);
  io.bytes(m.data, kMaxPayload);
}
template <class Io>
void layout(Io& io, Message<Failed> auto& m) {
  io.i32(m.code);
  io.bytes(m.line, 64 * 1024);
  io.flag(m.timed_out, "failure's timeout flag");
}
template <class Io>
void layout(Io& io, Message<Done> auto& m) {
  io.i32(m.code);
}
template <class Io>
void layout(Io& io, Message<Abort> auto& m) {
  io.flag(m.now, "abort flag");
  io.bytes(m.reason, 64 * 1024);
}

template <class Io>
void layout(Io& io, Message<StatusAsk> auto& m) {
  io.u64(m.id);
  io.bytes(m.what, 64);
}
template <class Io>
void layout(Io& io, Message<StatusReply> auto& m) {
  io.u64(m.id);
  io.bytes(m.json, 16u << 20);
}

template <class Io>
void layout(Io& io, Message<ReportFile> auto& m) {
  io.bytes(m.name, 255);
  io.bytes(m.content, 32u << 20);
}

template <class M>
std::string encode_layout(const M& m) {
  Put io;
  layout(io, m);
  return io.w.take();
}
// The whole payload is the message: bytes left over are a ProtocolError.
template <class M>
M decode_layout(std::string_view payload) {
  Get io{Reader(payload)};
  M m;
  layout(io, m);
  io.r.finish();
  return m;
}

}  // namespace

std::string encode(const Challenge& m) {
  return encode_layout(m);
}
std::string encode(const Hello& m) {
  return encode_layout(m);
}
std::string encode(const Welcome& m) {
  return encode_layout(m);
}
std::string encode(const Fence& m) {
  return encode_layout(m);
}
std::string encode(const Failed& m) {
  return encode_layout(m);
}
std::string encode(const Done& m) {
  return encode_layout(m);
}
std::string encode(const Abort& m) {
  return encode_layout(m);
}
std::string encode(const StatusAsk& m) {
  return encode_layout(m);
}
std::string encode(const StatusReply& m) {
  return encode_layout(m);
}
std::string encode(const ReportFile& m) {
  return encode_layout(m);
}

Challenge decode_challenge(std::string_view payload) {
  return decode_layout<Challenge>(payload);
}
Hello decode_hello(std::string_view payload) {
  return decode_layout<Hello>(payload);
}
Welcome decode_welcome(std::string_view payload) {
  return decode_layout<Welcome>(payload);
}
Fence decode_fence(std::string_view payload) {
  return decode_layout<Fence>(payload);
}

Failed decode_failed(std::string_view payload) {
  Failed m = decode_layout<Failed>(payload);
  if (m.code <= 0 || m.code > 255)
    throw ProtocolError("failure with exit code " + std::to_string(m.code));
  return m;
}

Done decode_done(std::string_view payload) {
  Done m = decode_layout<Done>(payload);
  if (m.code < 0 || m.code > 255)
    throw ProtocolError("done with exit code " + std::to_string(m.code));
  return m;
}

StatusAsk decode_status_ask(std::string_view payload) {
  return decode_layout<StatusAsk>(payload);
}

StatusReply decode_status_reply(std::string_view payload) {
  return decode_layout<StatusReply>(payload);
}

ReportFile decode_report_file(std::string_view payload) {
  ReportFile m = decode_layout<ReportFile>(payload);
  if (m.name.empty() || m.name == "." || m.name == ".." ||
      m.name.find_first_of(std::string("/\0", 2)) != std::string::npos)
    throw ProtocolError("report file name '" + m.name + "' is not a plain file name");
  return m;
}

Abort decode_abort(std::string_view payload) {
  return decode_layout<Abort>(payload);
}

std::string encode(const PlanMsg& m) {
  Writer w;
  w.bytes(m.job_id).u32(m.node).u32(static_cast<std::uint32_t>(m.plan.size));
  w.u32(static_cast<std::uint32_t>(m.plan.nodes.size()));
  for (const auto& n : m.plan.nodes) {
    w.bytes(n.host)
        .u32(static_cast<std::uint32_t>(n.slots))
        .u32(static_cast<std::uint32_t>(n.ranks.size()));
    for (int r : n.ranks) w.u32(static_cast<std::uint32_t>(r));
  }
  w.strings(m.argv);
  w.u32(static_cast<std::uint32_t>(m.exports.size()));
  for (const auto& [k, v] : m.exports) w.bytes(k).bytes(v);
  w.u8(static_cast<std::uint8_t>((m.tag_output ? 1 : 0) | (m.timestamp_output ? 2 : 0) |
                                 (m.verbose ? 4 : 0) | (m.report_bindings ? 8 : 0) |
                                 (m.nccl_env ? 16 : 0)));
  w.bytes(m.output_dir).u32(m.kill_grace_ms).u32(m.heartbeat_ms).u32(m.link_timeout_ms);
  w.bytes(m.bind_to).bytes(m.map_by);
  w.bytes(m.working_dir);  // since protocol version 2
  return w.take();
}

PlanMsg decode_plan(std::string_view payload) {
  Reader r(payload);
  PlanMsg m;
  m.job_id = r.bytes(4096);
  m.node = r.u32();
  m.plan.size = checked_int(r.u32(), kMaxRanks, "job size");
  const std::uint32_t nodes = r.u32();
  if (nodes == 0 || nodes > kMaxRanks)
    throw ProtocolError("plan with " + std::to_string(nodes) + " nodes");
  m.plan.ranks.assign(static_cast<size_t>(m.plan.size), RankSlot{});
  std::vector<bool> seen(static_cast<size_t>(m.plan.size), false);
  for (std::uint32_t i = 0; i < nodes; ++i) {
    NodePlan n;
    n.host = r.bytes(1024);
    n.slots = checked_int(r.u32(), kMaxRanks, "slots");
    n.local = false;
    const std::uint32_t count = r.u32();
    if (count > static_cast<std::uint32_t>(m.plan.size))
      throw ProtocolError("node with more ranks than the job");
    for (std::uint32_t l = 0; l < count; ++l) {
      const int rank = checked_int(r.u32(), static_cast<std::uint32_t>(m.plan.size) - 1, "rank");
      if (seen[static_cast<size_t>(rank)])
        throw ProtocolError("rank " + std::to_string(rank) + " placed twice");
      seen[static_cast<size_t>(rank)] = true;
      n.ranks.push_back(rank);
      m.plan.ranks[static_cast<size_t>(rank)] = {rank, static_cast<int>(i), static_cast<int>(l)};
    }
    m.plan.nodes.push_back(std::move(n));
  }
  for (bool s : seen) {
    if (!s) throw ProtocolError("plan leaves a rank without a node");
  }
  if (m.node >= nodes)
    throw ProtocolError("plan for node " + std::to_string(m.node) + " of " + std::to_string(nodes));
  m.plan.nodes[m.node].local = true;
  m.argv = r.strings();
  if (m.argv.empty()) throw ProtocolError("plan without a program");
  const std::uint32_t nexp = r.u32();
  if (nexp > payload.size() / 8) throw ProtocolError("export list does not fit the message");
  for (std::uint32_t i = 0; i < nexp; ++i) {
    std::string k = r.bytes(4096);
    std::string v = r.bytes();
    m.exports.emplace_back(std::move(k), std::move(v));
  }
  const std::uint8_t flags = r.u8();
  if (flags & ~31u) throw ProtocolError("unknown plan flags");
  m.tag_output = flags & 1;
  m.timestamp_output = flags & 2;
  m.verbose = flags & 4;
  m.report_bindings = flags & 8;
  m.nccl_env = flags & 16;
  m.output_dir = r.bytes(4096);
  m.kill_grace_ms = r.u32();
  m.heartbeat_ms = r.u32();
  m.link_timeout_ms = r.u32();
  if (m.heartbeat_ms == 0 || m.link_timeout_ms <= m.heartbeat_ms)
    throw ProtocolError("bad heartbeat settings");
  m.bind_to = r.bytes(256);
  m.map_by = r.bytes(256);
  m.working_dir = r.bytes(4096);
  r.finish();
  return m;
}

}  // namespace spark::launch::control
