// The control plane's wire format: every message is one frame
//   magic "SPKR" (4) | version (1) | type (1) | reserved 0 (2) | payload length (4) | payload
// with integers in network byte order. The payload is built with Writer and read back with
// Reader; both are strict: a short, long or inconsistent payload is a ProtocolError, which
// closes that connection (never the launcher). See docs/multihost.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spark::launch::control {

inline constexpr std::uint32_t kMagic = 0x53504b52;  // "SPKR"
inline constexpr std::uint8_t kVersion =
    3;  // 2: the plan carries the working directory; 3: status, report files
inline constexpr std::size_t kHeaderSize = 12;
/// Before a peer has proven it knows the job's secret it may send only small frames, so a
/// stranger cannot make the launcher allocate much.
inline constexpr std::uint32_t kMaxUnauthenticatedPayload = 1024;
/// After authentication: fence blobs of large jobs fit, a broken peer cannot exhaust memory.
inline constexpr std::uint32_t kMaxPayload = 64u << 20;

enum class MsgType : std::uint8_t {
  kChallenge = 1,     // launcher -> daemon: launcher nonce
  kHello = 2,         // daemon -> launcher: node, daemon nonce, daemon MAC
  kWelcome = 3,       // launcher -> daemon: launcher MAC (the daemon checks the launcher)
  kPlan = 4,          // launcher -> daemon: what to run
  kFenceUp = 5,       // daemon -> launcher: this node's fence contribution
  kFenceDown = 6,     // launcher -> daemon: every node's contributions
  kFailed = 7,        // daemon -> launcher: the node's first failure (exit code, line)
  kDone = 8,          // daemon -> launcher: every local rank ended (exit code)
  kAbort = 9,         // launcher -> daemon: stop every rank
  kHeartbeat = 10,    // both ways, once a second
  kStarted = 11,      // daemon -> launcher: the node's ranks were started
  kStatusAsk = 12,    // launcher -> daemon: `sparkrun status` on the launch host asks (id, what)
  kStatusReply = 13,  // daemon -> launcher: its node runner's answer (id, JSON)
  kReportFile = 14,   // daemon -> launcher: a file of its part of a failed job's report
};

/// A malformed, unknown, oversized or unexpected message.
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Frame {
  MsgType type{};
  std::string payload;
};

/// The name of a message type for logs ("fence-up"); "type N" for unknown values.
std::string type_name(std::uint8_t type);

/// Encodes one frame. Throws ProtocolError when the payload exceeds kMaxPayload.
std::string encode_frame(MsgType type, std::string_view payload);

/// Cuts a byte stream into frames. Feed it what the socket gave; take frames with next().
class FrameDecoder {
 public:
  explicit FrameDecoder(std::uint32_t max_payload = kMaxUnauthenticatedPayload)
      : max_payload_(max_payload) {}
  void set_max_payload(std::uint32_t max) { max_payload_ = max; }
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  /// The next complete frame, or nullopt when more bytes are needed. Throws ProtocolError
  /// as soon as a header is wrong (bad magic, version, type, reserved bits, length).
  std::optional<Frame> next();
  /// Bytes received but not yet part of a complete frame.
  std::size_t pending() const { return buffer_.size(); }

 private:
  std::uint32_t max_payload_;
  std::string buffer_;
};

/// Builds a payload.
class Writer {
 public:
  Writer& u8(std::uint8_t v);
  Writer& u32(std::uint32_t v);
  Writer& i32(std::int32_t v) { return u32(static_cast<std::uint32_t>(v)); }
  Writer& u64(std::uint64_t v);
  Writer& bytes(std::string_view v);  // u32 length + bytes
  Writer& raw(std::string_view v);    // fixed-size field, no length
  Writer& strings(const std::vector<std::string>& v);
  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// Reads a payload; every read checks the remaining length.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::uint8_t u8();
  std::uint32_t u32();
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::uint64_t u64();
  std::string bytes(std::uint32_t max = kMaxPayload);
  std::string raw(std::size_t n);
  std::vector<std::string> strings(std::uint32_t max_count = 1u << 20);
  /// Throws ProtocolError when bytes are left over.
  void finish() const;

 private:
  std::string_view take(std::size_t n);
  std::string_view in_;
};

}  // namespace spark::launch::control
