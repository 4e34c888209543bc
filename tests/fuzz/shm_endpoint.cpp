// The shm endpoint a peer of the node publishes ("segment;pid;pid-namespace;probe-address;
// cookie", libspark/src/transport/shm/shm_endpoint.hpp), parsed at attach. The input is that
// text. Anything malformed must be a BootstrapError naming the text and the rank; what is
// accepted must survive text() and parse() again unchanged, within the documented bounds.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_seeds.hpp"
#include "spark/error.hpp"
#include "transport/shm/shm_endpoint.hpp"

using spark::transport::ShmEndpoint;

namespace {

void write_seeds(const char* dir) {
  spark::fuzz::write_seed(dir, "endpoint",
                          ShmEndpoint{"/spark-job-node-r1-4242-1", 4242, "4026531836",
                                      0x7ffc12345678u, 0x9e3779b97f4a7c15u}
                              .text());
  spark::fuzz::write_seed(dir, "no_namespace", ShmEndpoint{"/s", 1, "?", 1, 1}.text());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  spark::fuzz::seeds_requested(write_seeds);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ShmEndpoint ep;
  try {
    ep = ShmEndpoint::parse(text, 7);
  } catch (const spark::BootstrapError& e) {
    if (std::string_view(e.what()).find("from rank 7") == std::string_view::npos) __builtin_trap();
    return 0;
  }
  if (ep.segment.empty() || ep.pid_namespace.empty() || ep.pid <= 0 || ep.probe == 0 ||
      ep.cookie == 0)
    __builtin_trap();
  const ShmEndpoint back = ShmEndpoint::parse(ep.text(), 7);
  if (back.segment != ep.segment || back.pid != ep.pid || back.pid_namespace != ep.pid_namespace ||
      back.probe != ep.probe || back.cookie != ep.cookie)
    __builtin_trap();
  return 0;
}
