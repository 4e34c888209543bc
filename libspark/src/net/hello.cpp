#include "net/hello.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "spark/error.hpp"

namespace spark::net::hello {

namespace {

constexpr std::uint32_t kDirectMagic = 0x5350524b;  // "SPRK"
constexpr std::uint32_t kRelayMagic = 0x5350524c;   // "SPRL"
constexpr std::uint32_t kProbeMagic = 0x53505250;   // "SPRP"

std::uint32_t magic_of(Kind k) {
  switch (k) {
    case Kind::relay:
      return kRelayMagic;
    case Kind::probe:
      return kProbeMagic;
    case Kind::direct:
      break;
  }
  return kDirectMagic;
}

struct Wire {
  std::uint32_t magic;
  std::int32_t rank;
  std::int32_t lane;
  std::int32_t dst;
  Token token;
};
static_assert(sizeof(Wire) == kSize);

// Every byte compared, whatever the first difference: the time taken says nothing about how
// much of a guessed token was right.
bool same_token(const Token& a, const Token& b) {
  std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::array<std::byte, kSize> encode(const Hello& h, const Token& token) {
  const Wire w{magic_of(h.kind), h.rank, h.lane, h.dst, token};
  std::array<std::byte, kSize> out;
  std::memcpy(out.data(), &w, kSize);
  return out;
}

std::optional<Hello> parse(std::span<const std::byte, kSize> bytes, const Token& token, int size,
                           std::string* why) {
  Wire w;
  std::memcpy(&w, bytes.data(), kSize);
  if (w.magic != kDirectMagic && w.magic != kRelayMagic && w.magic != kProbeMagic) {
    *why = "not a libspark tcp hello";
    return std::nullopt;
  }
  if (!same_token(w.token, token)) {
    *why = "a hello without this job's token (another job, or not a rank)";
    return std::nullopt;
  }
  if (w.rank < 0 || w.rank >= size || w.dst < 0 || w.dst >= size || w.lane < 0) {
    *why = "a hello naming rank " + std::to_string(w.rank) + " -> " + std::to_string(w.dst) +
           " lane " + std::to_string(w.lane) + " outside a job of " + std::to_string(size);
    return std::nullopt;
  }
  const Kind kind = w.magic == kRelayMagic   ? Kind::relay
                    : w.magic == kProbeMagic ? Kind::probe
                                             : Kind::direct;
  return Hello{kind, w.rank, w.lane, w.dst};
}

Token random_token() {
  Token t{};
  std::size_t got = 0;
  while (got < t.size()) {
    const ssize_t n = ::getrandom(t.data() + got, t.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw Error(std::string("getrandom for the job token failed: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  return t;
}

std::string to_hex(const Token& token) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (auto b : token) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::optional<Token> from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  Token t{};
  for (std::size_t i = 0; i < t.size(); ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    t[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return t;
}

}  // namespace spark::net::hello
