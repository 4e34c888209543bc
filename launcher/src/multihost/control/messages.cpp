#include "control/messages.hpp"

namespace spark::launch::control {
namespace {

constexpr std::uint32_t kMaxRanks = 1u << 20;

int checked_int(std::uint32_t v, std::uint32_t max, const char* what) {
  if (v > max)
    throw ProtocolError(std::string(what) + " " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

}  // namespace

std::string encode(const Challenge& m) {
  return Writer().raw(as_bytes(m.nonce)).take();
}
std::string encode(const Hello& m) {
  return Writer().u32(m.node).raw(as_bytes(m.nonce)).raw(as_bytes(m.mac)).take();
}
std::string encode(const Welcome& m) {
  return Writer().raw(as_bytes(m.mac)).take();
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

std::string encode(const Fence& m) {
  return Writer().u64(m.seq).bytes(m.data).take();
}
std::string encode(const Failed& m) {
  return Writer().i32(m.code).bytes(m.line).take();
}
std::string encode(const Done& m) {
  return Writer().i32(m.code).take();
}
std::string encode(const Abort& m) {
  return Writer().u8(m.now ? 1 : 0).bytes(m.reason).take();
}

Challenge decode_challenge(std::string_view payload) {
  Reader r(payload);
  Challenge m;
  m.nonce = from_bytes<Nonce>(r.raw(kNonceSize));
  r.finish();
  return m;
}

Hello decode_hello(std::string_view payload) {
  Reader r(payload);
  Hello m;
  m.node = r.u32();
  m.nonce = from_bytes<Nonce>(r.raw(kNonceSize));
  m.mac = from_bytes<Mac>(r.raw(kMacSize));
  r.finish();
  return m;
}

Welcome decode_welcome(std::string_view payload) {
  Reader r(payload);
  Welcome m;
  m.mac = from_bytes<Mac>(r.raw(kMacSize));
  r.finish();
  return m;
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

Fence decode_fence(std::string_view payload) {
  Reader r(payload);
  Fence m;
  m.seq = r.u64();
  m.data = r.bytes();
  r.finish();
  return m;
}

Failed decode_failed(std::string_view payload) {
  Reader r(payload);
  Failed m;
  m.code = r.i32();
  m.line = r.bytes(64 * 1024);
  r.finish();
  if (m.code <= 0 || m.code > 255)
    throw ProtocolError("failure with exit code " + std::to_string(m.code));
  return m;
}

Done decode_done(std::string_view payload) {
  Reader r(payload);
  Done m;
  m.code = r.i32();
  r.finish();
  if (m.code < 0 || m.code > 255)
    throw ProtocolError("done with exit code " + std::to_string(m.code));
  return m;
}

Abort decode_abort(std::string_view payload) {
  Reader r(payload);
  Abort m;
  const std::uint8_t now = r.u8();
  if (now > 1) throw ProtocolError("bad abort flag");
  m.now = now == 1;
  m.reason = r.bytes(64 * 1024);
  r.finish();
  return m;
}

}  // namespace spark::launch::control
