// What one side of a queue pair tells the other at wire-up, in a fixed little-endian byte
// layout (the bootstrap carries bytes between ranks that may differ in build or endianness).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "verbs/gid.hpp"

namespace spark::verbs {

struct Endpoint {
  std::string device;  ///< e.g. "rocep1s0f0" (<= 63 bytes)
  std::uint8_t port = 1;
  std::uint32_t gid_index = 0;
  Gid gid{};
  std::uint32_t qpn = 0;   ///< 24 bits
  std::uint32_t psn = 0;   ///< 24 bits
  std::uint32_t mtu = 0;   ///< active path MTU in bytes (256..4096)
  std::uint64_t addr = 0;  ///< remote-writable region the peer writes into
  std::uint32_t rkey = 0;
  std::uint64_t bytes = 0;  ///< size of that region
  bool operator==(const Endpoint&) const = default;
};

std::vector<std::byte> serialize(const Endpoint& ep);
/// Strict: wrong magic/version/length, a device name that is empty or too long, a QPN/PSN
/// over 24 bits or an MTU that is not a verbs MTU throw VerbsError.
Endpoint deserialize(std::span<const std::byte> bytes);

/// One line for logs and errors: "rxe0 port 1 gid[1] ::ffff:10.50.0.1 qpn 17 mtu 1024".
std::string describe(const Endpoint& ep);

}  // namespace spark::verbs
