// The environment rendezvous store (libspark/src/bootstrap/store_server.cpp) reading frames
// from the network: whoever reaches SPARK_RENDEZVOUS's port can send it bytes. Each input is
// served by a fresh in-process StoreServer (a job of two ranks, job id "fuzz") over loopback:
// the input's first byte splits the rest into what two connections send, one after the other.
// A malformed frame must close that connection only; the server must not crash or leak.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "bootstrap/store_server.hpp"
#include "bootstrap/wire.hpp"
#include "fuzz_seeds.hpp"

namespace wire = spark::bootstrap::wire;

namespace {

std::string as_string(const std::vector<std::byte>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

void write_seeds(const char* dir) {
  using spark::fuzz::write_seed;
  const auto hello = [](std::uint32_t rank, std::string job) {
    return as_string(wire::Writer(wire::Type::hello).u32(rank).u32(2).str(job).finish());
  };
  const std::string put =
      as_string(wire::Writer(wire::Type::put).str("spark.tcp").str("127.0.0.1;40000").finish());
  const std::string fence = as_string(wire::Writer(wire::Type::fence).u64(1).u32(5).finish());
  const std::string bye = as_string(wire::Writer(wire::Type::bye).finish());
  const std::string abort =
      as_string(wire::Writer(wire::Type::abort).u32(3).str("rank 1 failed").finish());
  // Byte 0 = split point (0x80: half of the rest on each connection).
  write_seed(dir, "hello_put_fence_bye", "\x01" + hello(0, "fuzz") + put + fence + bye);
  const std::string a = hello(0, "fuzz") + put + fence;
  const std::string b = hello(1, "fuzz") + put + fence + bye;
  write_seed(dir, "two_ranks_fence",
             std::string(1, static_cast<char>(a.size() * 255 / (a.size() + b.size()))) + a + b);
  write_seed(dir, "abort", "\x01" + hello(1, "fuzz") + abort);
  write_seed(dir, "wrong_job", "\x01" + hello(1, "other"));
  write_seed(
      dir, "wrong_size",
      "\x01" + as_string(wire::Writer(wire::Type::hello).u32(0).u32(9).str("fuzz").finish()));
  write_seed(dir, "no_hello", "\x01" + put);
}

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) __builtin_trap();
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) __builtin_trap();
  return fd;
}

// Sends `bytes`, half-closes, and reads what the server answers until it closes or is quiet
// for `quiet_ms` (a fence that waits for a rank that never comes).
void talk(int fd, std::string_view bytes, int quiet_ms) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed on a bad frame
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, quiet_ms) <= 0) break;
    if (::recv(fd, buf, sizeof buf, 0) <= 0) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spark::fuzz::seeds_requested(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t split = in.size() * data[0] / 255;
  spark::bootstrap::StoreServer server(0, 2, "fuzz");
  const int a = connect_to(server.port());
  const int b = connect_to(server.port());
  talk(a, in.substr(0, split), 5);
  talk(b, in.substr(split), 5);
  ::close(a);
  ::close(b);
  return 0;
}
