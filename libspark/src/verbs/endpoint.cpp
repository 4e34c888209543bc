#include "verbs/endpoint.hpp"

#include <cstring>

#include "verbs/verbs_error.hpp"

namespace spark::verbs {
namespace {

constexpr std::uint32_t kMagic = 0x45565053;  // "SPVE"
constexpr std::uint16_t kVersion = 1;
constexpr std::size_t kMaxDevice = 63;

struct Writer {
  std::vector<std::byte> out;
  void u(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
  }
  void raw(const void* p, std::size_t n) {
    auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  }
};

struct Reader {
  std::span<const std::byte> in;
  std::size_t pos = 0;
  void need(std::size_t n) {
    if (in.size() - pos < n) {
      throw VerbsError("malformed RDMA endpoint: " + std::to_string(in.size()) +
                       " bytes, truncated at offset " + std::to_string(pos));
    }
  }
  std::uint64_t u(int n) {
    need(n);
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::to_integer<std::uint64_t>(in[pos + i]) << (8 * i);
    pos += n;
    return v;
  }
  void raw(void* p, std::size_t n) {
    need(n);
    std::memcpy(p, in.data() + pos, n);
    pos += n;
  }
};

bool valid_mtu(std::uint32_t m) {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

}  // namespace

std::vector<std::byte> serialize(const Endpoint& ep) {
  if (ep.device.empty() || ep.device.size() > kMaxDevice) {
    throw VerbsError("RDMA endpoint device name \"" + ep.device + "\" is empty or too long");
  }
  Writer w;
  w.u(kMagic, 4);
  w.u(kVersion, 2);
  w.u(ep.device.size(), 1);
  w.raw(ep.device.data(), ep.device.size());
  w.u(ep.port, 1);
  w.u(ep.gid_index, 4);
  w.raw(ep.gid.data(), ep.gid.size());
  w.u(ep.qpn, 4);
  w.u(ep.psn, 4);
  w.u(ep.mtu, 4);
  w.u(ep.addr, 8);
  w.u(ep.rkey, 4);
  w.u(ep.bytes, 8);
  return std::move(w.out);
}

Endpoint deserialize(std::span<const std::byte> bytes) {
  Reader r{bytes};
  if (r.u(4) != kMagic) throw VerbsError("malformed RDMA endpoint: bad magic");
  if (auto v = r.u(2); v != kVersion) {
    throw VerbsError("RDMA endpoint version " + std::to_string(v) + " (this build speaks " +
                     std::to_string(kVersion) + "): run the same sparkrun on every node");
  }
  Endpoint ep;
  auto len = r.u(1);
  if (len == 0 || len > kMaxDevice) throw VerbsError("malformed RDMA endpoint: device name length");
  ep.device.resize(len);
  r.raw(ep.device.data(), len);
  ep.port = static_cast<std::uint8_t>(r.u(1));
  ep.gid_index = static_cast<std::uint32_t>(r.u(4));
  r.raw(ep.gid.data(), ep.gid.size());
  ep.qpn = static_cast<std::uint32_t>(r.u(4));
  ep.psn = static_cast<std::uint32_t>(r.u(4));
  ep.mtu = static_cast<std::uint32_t>(r.u(4));
  ep.addr = r.u(8);
  ep.rkey = static_cast<std::uint32_t>(r.u(4));
  ep.bytes = r.u(8);
  if (r.pos != bytes.size()) throw VerbsError("malformed RDMA endpoint: trailing bytes");
  if (ep.qpn > 0xffffff || ep.psn > 0xffffff)
    throw VerbsError("malformed RDMA endpoint: QPN/PSN over 24 bits");
  if (!valid_mtu(ep.mtu))
    throw VerbsError("malformed RDMA endpoint: MTU " + std::to_string(ep.mtu));
  if (ep.port == 0) throw VerbsError("malformed RDMA endpoint: port 0");
  return ep;
}

std::string describe(const Endpoint& ep) {
  return ep.device + " port " + std::to_string(ep.port) + " gid[" + std::to_string(ep.gid_index) +
         "] " + gid_text(ep.gid) + " qpn " + std::to_string(ep.qpn) + " mtu " +
         std::to_string(ep.mtu);
}

}  // namespace spark::verbs
