// What a peer sends to set up its RC queue pairs (libspark/src/verbs/endpoint.hpp): device,
// port, GID, QPN, PSN, MTU and the remote-writable region, in a fixed little-endian layout,
// read at wire-up from a rank that may run another build. The input is those bytes. Anything
// malformed must be a VerbsError; what is accepted must be exactly what serialize() writes
// for it (nothing ignored, nothing read twice) and within the documented bounds.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "fuzz_seeds.hpp"
#include "verbs/endpoint.hpp"
#include "verbs/verbs_error.hpp"

namespace verbs = spark::verbs;

namespace {

void write_seed(const char* dir, const std::string& name, const verbs::Endpoint& ep) {
  const auto bytes = verbs::serialize(ep);
  spark::fuzz::write_seed(dir, name, {reinterpret_cast<const char*>(bytes.data()), bytes.size()});
}

void write_seeds(const char* dir) {
  verbs::Endpoint ep;
  ep.device = "rxe0";
  ep.gid_index = 1;
  ep.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 50, 0, 1};
  ep.qpn = 17;
  ep.psn = 0x123456;
  ep.mtu = 1024;
  ep.addr = 0x7f0012340000;
  ep.rkey = 0x1234;
  ep.bytes = 4 << 20;
  write_seed(dir, "rxe0", ep);
  ep.device = "rocep1s0f0";
  ep.port = 2;
  ep.mtu = 4096;
  ep.qpn = 0xffffff;
  write_seed(dir, "rocep1s0f0", ep);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  spark::fuzz::seeds_requested(write_seeds);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  verbs::Endpoint ep;
  try {
    ep = verbs::deserialize(bytes);
  } catch (const verbs::VerbsError&) {
    return 0;
  }
  if (ep.device.empty() || ep.device.size() > 63 || ep.qpn > 0xffffff || ep.psn > 0xffffff ||
      ep.port == 0)
    __builtin_trap();
  const auto again = verbs::serialize(ep);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  if (verbs::describe(ep).find(ep.device) != 0) __builtin_trap();
  return 0;
}
