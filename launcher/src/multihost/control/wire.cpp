#include "control/wire.hpp"

namespace spark::launch::control {
namespace {

void put_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_be(std::string_view in, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<unsigned char>(in[static_cast<size_t>(i)]);
  return v;
}

bool known_type(std::uint8_t t) {
  return t >= static_cast<std::uint8_t>(MsgType::kChallenge) &&
         t <= static_cast<std::uint8_t>(MsgType::kReportFile);
}

}  // namespace

std::string type_name(std::uint8_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kChallenge:
      return "challenge";
    case MsgType::kHello:
      return "hello";
    case MsgType::kWelcome:
      return "welcome";
    case MsgType::kPlan:
      return "plan";
    case MsgType::kFenceUp:
      return "fence-up";
    case MsgType::kFenceDown:
      return "fence-down";
    case MsgType::kFailed:
      return "failed";
    case MsgType::kDone:
      return "done";
    case MsgType::kAbort:
      return "abort";
    case MsgType::kHeartbeat:
      return "heartbeat";
    case MsgType::kStarted:
      return "started";
    case MsgType::kStatusAsk:
      return "status-ask";
    case MsgType::kStatusReply:
      return "status-reply";
    case MsgType::kReportFile:
      return "report-file";
  }
  return "type " + std::to_string(type);
}

std::string encode_frame(MsgType type, std::string_view payload) {
  if (payload.size() > kMaxPayload) {
    throw ProtocolError(type_name(static_cast<std::uint8_t>(type)) + " message of " +
                        std::to_string(payload.size()) + " bytes exceeds the limit of " +
                        std::to_string(kMaxPayload) + " bytes");
  }
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  put_be(out, kMagic, 4);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(type));
  put_be(out, 0, 2);
  put_be(out, payload.size(), 4);
  out.append(payload);
  return out;
}

std::optional<Frame> FrameDecoder::next() {
  // Check each header field as soon as its bytes are here: random bytes fail at once
  // instead of waiting for a "length" worth of data.
  const std::string_view b(buffer_);
  if (b.size() >= 4 && get_be(b, 4) != kMagic)
    throw ProtocolError("bad magic (not a sparkrun control connection)");
  if (b.size() >= 5 && static_cast<std::uint8_t>(b[4]) != kVersion) {
    throw ProtocolError("unsupported protocol version " +
                        std::to_string(static_cast<std::uint8_t>(b[4])) +
                        " (this sparkrun speaks " + std::to_string(kVersion) +
                        "; use the same sparkrun version on every host)");
  }
  if (b.size() >= 6 && !known_type(static_cast<std::uint8_t>(b[5]))) {
    throw ProtocolError("unknown message " + type_name(static_cast<std::uint8_t>(b[5])));
  }
  if (b.size() >= 8 && get_be(b.substr(6), 2) != 0) throw ProtocolError("reserved header bits set");
  if (b.size() < kHeaderSize) return std::nullopt;
  const std::uint64_t len = get_be(b.substr(8), 4);
  if (len > max_payload_) {
    throw ProtocolError(type_name(static_cast<std::uint8_t>(b[5])) + " message of " +
                        std::to_string(len) + " bytes exceeds the limit of " +
                        std::to_string(max_payload_) + " bytes");
  }
  if (b.size() < kHeaderSize + len) return std::nullopt;
  Frame f;
  f.type = static_cast<MsgType>(b[5]);
  f.payload.assign(b.substr(kHeaderSize, len));
  buffer_.erase(0, kHeaderSize + len);
  return f;
}

Writer& Writer::u8(std::uint8_t v) {
  out_.push_back(static_cast<char>(v));
  return *this;
}
Writer& Writer::u32(std::uint32_t v) {
  put_be(out_, v, 4);
  return *this;
}
Writer& Writer::u64(std::uint64_t v) {
  put_be(out_, v, 8);
  return *this;
}
Writer& Writer::bytes(std::string_view v) {
  if (v.size() > kMaxPayload)
    throw ProtocolError("field of " + std::to_string(v.size()) + " bytes is too large");
  u32(static_cast<std::uint32_t>(v.size()));
  out_.append(v);
  return *this;
}
Writer& Writer::raw(std::string_view v) {
  out_.append(v);
  return *this;
}
Writer& Writer::strings(const std::vector<std::string>& v) {
  u32(static_cast<std::uint32_t>(v.size()));
  for (const auto& s : v) bytes(s);
  return *this;
}

std::string_view Reader::take(std::size_t n) {
  if (in_.size() < n) {
    throw ProtocolError("truncated message: needed " + std::to_string(n) + " more bytes, " +
                        std::to_string(in_.size()) + " left");
  }
  std::string_view out = in_.substr(0, n);
  in_.remove_prefix(n);
  return out;
}

std::uint8_t Reader::u8() {
  return static_cast<std::uint8_t>(take(1)[0]);
}
std::uint32_t Reader::u32() {
  return static_cast<std::uint32_t>(get_be(take(4), 4));
}
std::uint64_t Reader::u64() {
  return get_be(take(8), 8);
}

std::string Reader::bytes(std::uint32_t max) {
  const std::uint32_t n = u32();
  if (n > max)
    throw ProtocolError("field of " + std::to_string(n) + " bytes exceeds " + std::to_string(max));
  return std::string(take(n));
}

std::string Reader::raw(std::size_t n) {
  return std::string(take(n));
}

std::vector<std::string> Reader::strings(std::uint32_t max_count) {
  const std::uint32_t n = u32();
  // Every string takes at least its 4-byte length: a count that cannot fit is malformed
  // (and must not reserve memory for it).
  if (n > max_count || n > in_.size() / 4)
    throw ProtocolError("string list of " + std::to_string(n) +
                        " entries does not fit the message");
  std::vector<std::string> out;
  out.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(bytes());
  return out;
}

void Reader::finish() const {
  if (!in_.empty())
    throw ProtocolError(std::to_string(in_.size()) + " unexpected bytes at the end of a message");
}

}  // namespace spark::launch::control
