// The first bytes on every tcp data connection (lanes and relays, docs/reliability.md):
//   magic u32 ("SPRK" direct, "SPRL" relay: forward to dst) | rank i32 | lane i32 | dst i32 |
//   token 16 bytes
// in host byte order (every rank runs the same build). The token is the job's: rank 0 draws it
// (getrandom) and hands it to the others through the bootstrap (spark.token), never on a
// command line. A connection whose first bytes are not a hello of this job (another job's
// ranks on a reused port, a probe, a stranger) is dropped before anything is read as data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace spark::transport::tcp_hello {

using Token = std::array<std::uint8_t, 16>;
inline constexpr std::size_t kSize = 32;

struct Hello {
  bool relay = false;  ///< "please forward to dst" (a relay hop), else a direct lane
  int rank = 0;        ///< the rank the connection is from (the source when relayed)
  int lane = 0;
  int dst = 0;  ///< the rank it is for
};

std::array<std::byte, kSize> encode(const Hello& h, const Token& token);

/// The hello in `bytes` when it carries this job's `token` and names ranks in [0, size) and a
/// lane >= 0; otherwise nullopt, and `why` says what was wrong (for the debug line).
std::optional<Hello> parse(std::span<const std::byte, kSize> bytes, const Token& token, int size,
                           std::string* why);

/// 16 bytes from getrandom(). Throws spark::Error when the kernel gives none.
Token random_token();
/// The token as 32 hex digits (the bootstrap value) and back; nullopt when malformed.
std::string to_hex(const Token& token);
std::optional<Token> from_hex(std::string_view text);

}  // namespace spark::transport::tcp_hello
