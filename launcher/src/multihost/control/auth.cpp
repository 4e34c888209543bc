#include "control/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace spark::launch::control {
namespace {

template <typename A>
A random_array(const char* what) {
  A a{};
  if (RAND_bytes(a.data(), static_cast<int>(a.size())) != 1) {
    throw std::runtime_error(
        std::string("cannot make the job's ") + what +
        ": OpenSSL RAND_bytes failed (is the system's entropy source available?)");
  }
  return a;
}

}  // namespace

Secret random_secret() {
  return random_array<Secret>("secret");
}
Nonce random_nonce() {
  return random_array<Nonce>("nonce");
}

Mac make_mac(const Secret& secret, Role role, std::string_view job_id, std::uint32_t node,
             const Nonce& peer_nonce, const Nonce& own_nonce) {
  std::string msg = role == Role::kDaemon ? "sparkrun-daemon" : "sparkrun-launcher";
  msg.push_back('\0');
  msg.append(job_id);
  msg.push_back('\0');
  for (int i = 3; i >= 0; --i) msg.push_back(static_cast<char>((node >> (8 * i)) & 0xff));
  msg.append(as_bytes(peer_nonce));
  msg.append(as_bytes(own_nonce));
  Mac mac{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac.data(),
           &len) == nullptr ||
      len != mac.size()) {
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  }
  return mac;
}

bool mac_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string to_hex(const Secret& secret) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(secret.size() * 2);
  for (unsigned char c : secret) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Secret secret_from_hex(std::string_view hex) {
  if (hex.size() != kSecretSize * 2) {
    throw std::invalid_argument("job secret: expected " + std::to_string(kSecretSize * 2) +
                                " hex digits, got " + std::to_string(hex.size()) + " characters");
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Secret s{};
  for (std::size_t i = 0; i < s.size(); ++i) {
    int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) throw std::invalid_argument("job secret: not a hex digit");
    s[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return s;
}

}  // namespace spark::launch::control
