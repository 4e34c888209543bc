// The job's hello: the first bytes on every data-plane connection (tcp lanes and relay hops,
// fabric probes, `sparkrun doctor`'s tcp echo; docs/reliability.md):
//   magic u32 ("SPRK" direct lane, "SPRL" relay: forward to dst, "SPRP" probe) | rank i32 |
//   lane i32 | dst i32 | token 16 bytes
// in host byte order (every rank runs the same build). The token is the job's: rank 0 draws it
// (getrandom) and hands it to the others through the bootstrap (bootstrap/job_token.hpp), never
// on a command line. A connection whose first bytes are not a hello of this job (another job's
// ranks on a reused port, a port scan, a stranger) is dropped before anything is read as data.
// A probe is answered (hello_exchange.hpp): the asking side learns that the listener it reached
// is this job's peer, not whatever else listens there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace spark::net::hello {

using Token = std::array<std::uint8_t, 16>;
inline constexpr std::size_t kSize = 32;

enum class Kind : std::uint8_t {
  direct,  ///< a tcp lane from rank to dst
  relay,   ///< a relay hop: "please forward to dst"
  probe,   ///< a fabric probe or a doctor echo: answered, then closed or echoed on
};

struct Hello {
  Kind kind = Kind::direct;
  int rank = 0;  ///< who the connection is from (the source when relayed; a node for probes)
  int lane = 0;  ///< the lane (a doctor test: its link index)
  int dst = 0;   ///< who it is for
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

}  // namespace spark::net::hello
