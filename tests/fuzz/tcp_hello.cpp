// The first 32 bytes of every data-plane connection (libspark/src/net/hello.hpp):
// anyone who reaches a rank's listening port can send them. Input: a token (16 bytes), a job
// size (1 byte), then the hello bytes. Parsing must accept only this job's hellos naming its
// ranks, and a token must survive its hex form (the bootstrap value) both ways.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "net/hello.hpp"

namespace hello = spark::net::hello;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 16 + 1 + hello::kSize) {
    // Short inputs: the hex decoder (a peer's spark.token value).
    if (auto t = hello::from_hex(std::string_view(reinterpret_cast<const char*>(data), size))) {
      if (hello::from_hex(hello::to_hex(*t)) != t) __builtin_trap();
    }
    return 0;
  }
  hello::Token token;
  std::memcpy(token.data(), data, 16);
  const int job_size = 1 + data[16];
  const auto* bytes = reinterpret_cast<const std::byte*>(data + 17);
  std::string why;
  const auto h = hello::parse(std::span<const std::byte, hello::kSize>(bytes, hello::kSize), token,
                              job_size, &why);
  if (h) {
    if (h->rank < 0 || h->rank >= job_size || h->dst < 0 || h->dst >= job_size || h->lane < 0)
      __builtin_trap();
    // What was accepted is exactly what this job's ranks send.
    const auto again = hello::encode(*h, token);
    if (std::memcmp(again.data(), bytes, hello::kSize) != 0) __builtin_trap();
  } else if (why.empty()) {
    __builtin_trap();  // a refusal must say why (the debug line)
  }
  return 0;
}
