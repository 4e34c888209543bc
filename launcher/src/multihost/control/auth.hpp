// Authentication of control connections with a per-job secret (HMAC-SHA256, OpenSSL).
//
//   launcher -> daemon  challenge: nonce_l
//   daemon -> launcher  hello:     node, nonce_d, HMAC(secret, "sparkrun-daemon" | job | node |
//   nonce_l | nonce_d) launcher -> daemon  welcome:   HMAC(secret, "sparkrun-launcher" | job | node
//   | nonce_d | nonce_l)
//
// Each side proves it knows the secret on a nonce the other side chose, so neither a
// replayed conversation nor a stranger who can reach the port gets in, and a daemon never
// takes orders from a process that merely listens on the launcher's address.
// The secret travels only on the launch agent's stdin (see docs/multihost.md).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace spark::launch::control {

inline constexpr std::size_t kSecretSize = 32;
inline constexpr std::size_t kNonceSize = 32;
inline constexpr std::size_t kMacSize = 32;

using Secret = std::array<unsigned char, kSecretSize>;
using Nonce = std::array<unsigned char, kNonceSize>;
using Mac = std::array<unsigned char, kMacSize>;

/// 32 random bytes from OpenSSL's RAND_bytes. Throws std::runtime_error when it fails.
Secret random_secret();
Nonce random_nonce();

enum class Role { kDaemon, kLauncher };

/// The MAC that `role` sends: over its own label, the job, the node and both nonces
/// (the peer's nonce first, so that each side answers the other's challenge).
Mac make_mac(const Secret& secret, Role role, std::string_view job_id, std::uint32_t node,
             const Nonce& peer_nonce, const Nonce& own_nonce);

/// Constant-time comparison (CRYPTO_memcmp).
bool mac_equal(const Mac& a, const Mac& b);

/// Lower-case hex, 64 characters.
std::string to_hex(const Secret& secret);
/// Strict: exactly 64 hex digits. Throws std::invalid_argument otherwise.
Secret secret_from_hex(std::string_view hex);

/// Converts between the fixed arrays and wire bytes.
template <typename A>
std::string_view as_bytes(const A& a) {
  return std::string_view(reinterpret_cast<const char*>(a.data()), a.size());
}
template <typename A>
A from_bytes(std::string_view s) {
  A a{};
  for (std::size_t i = 0; i < a.size() && i < s.size(); ++i)
    a[i] = static_cast<unsigned char>(s[i]);
  return a;
}

}  // namespace spark::launch::control
