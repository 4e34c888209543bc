// Wire format of the environment rendezvous store: frames of [u32 length][u8 type][fields],
// integers little-endian, strings and byte blobs as [u32 length][bytes]. Internal to
// spark_bootstrap; client and server are always the same build, so there is no versioning
// beyond the job-size and job-id checks in HELLO.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace spark::bootstrap::wire {

enum class Type : std::uint8_t {
  hello = 1,   // C->S: u32 rank, u32 size, str job_id
  welcome,     // S->C: (empty)
  error,       // S->C: str message (the server refuses this client; it closes the connection)
  put,         // C->S: str key, bytes value
  fence,       // C->S: u64 epoch, u32 timeout_ms
  fence_ok,    // S->C: u32 n, n x (u32 rank, str key, bytes value): every committed entry
  fence_fail,  // S->C: str message
  abort,       // C->S: u32 status, str message
  bye,         // C->S: (empty) this rank is done with the store
};

inline constexpr std::uint32_t kMaxFrame = 64u
                                           << 20;  // endpoint blobs are tiny; a cap stops garbage

/// Thrown on malformed frames (a peer that is not a libspark rendezvous).
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Writer {
 public:
  explicit Writer(Type type) {
    buf_.resize(4);
    u8(static_cast<std::uint8_t>(type));
  }
  Writer& u8(std::uint8_t v) {
    buf_.push_back(static_cast<std::byte>(v));
    return *this;
  }
  Writer& u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  Writer& u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  Writer& bytes(std::span<const std::byte> v) {
    u32(static_cast<std::uint32_t>(v.size()));
    buf_.insert(buf_.end(), v.begin(), v.end());
    return *this;
  }
  Writer& str(const std::string& s) {
    return bytes({reinterpret_cast<const std::byte*>(s.data()), s.size()});
  }
  /// The complete frame, length prefix filled in.
  std::vector<std::byte> finish() {
    const auto n = static_cast<std::uint32_t>(buf_.size() - 4);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<std::byte>(n >> (8 * i));
    return std::move(buf_);
  }

 private:
  std::vector<std::byte> buf_;
};

/// Reads the body of one frame (after the length prefix).
class Reader {
 public:
  explicit Reader(std::span<const std::byte> body) : body_(body) {}
  Type type() {
    const auto t = u8();
    if (t < static_cast<std::uint8_t>(Type::hello) || t > static_cast<std::uint8_t>(Type::bye)) {
      throw ProtocolError("unknown message type " + std::to_string(t));
    }
    return static_cast<Type>(t);
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint32_t u32() {
    const auto b = take(4);
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b[i]) << (8 * i);
    return v;
  }
  std::uint64_t u64() {
    const auto b = take(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b[i]) << (8 * i);
    return v;
  }
  std::vector<std::byte> bytes() {
    const auto n = u32();
    const auto b = take(n);
    return {b.begin(), b.end()};
  }
  std::string str() {
    const auto n = u32();
    const auto b = take(n);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  /// Every byte of the body read (a decoder that must refuse trailing bytes asks).
  bool at_end() const noexcept { return pos_ == body_.size(); }

 private:
  std::span<const std::byte> take(std::size_t n) {
    if (n > body_.size() - pos_) throw ProtocolError("truncated message");
    auto s = body_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::span<const std::byte> body_;
  std::size_t pos_ = 0;
};

inline std::uint32_t frame_length(const std::byte (&prefix)[4]) {
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(prefix[i]) << (8 * i);
  return n;
}

}  // namespace spark::bootstrap::wire
