#include "transport/shm/shm_endpoint.hpp"

#include <limits>
#include <vector>

#include "spark/error.hpp"
#include "spark/protocol/number.hpp"
#include "spark/protocol/printable.hpp"

namespace spark::transport {

std::string ShmEndpoint::text() const {
  return segment + ";" + std::to_string(pid) + ";" + pid_namespace + ";" + std::to_string(probe) +
         ";" + std::to_string(cookie);
}

ShmEndpoint ShmEndpoint::parse(std::string_view text, int from_rank) {
  auto malformed = [&](const std::string& what) {
    return BootstrapError("shm transport: malformed endpoint '" + protocol::printable(text) +
                          "' from rank " + std::to_string(from_rank) + ": " + what +
                          " (expected segment;pid;pid-namespace;probe-address;cookie; every rank "
                          "must run the same libspark)");
  };
  std::vector<std::string_view> field;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(';', at);
    field.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  if (field.size() != 5) throw malformed(std::to_string(field.size()) + " fields, not 5");
  auto number = [&](std::size_t i, const char* name, std::uint64_t max) {
    std::uint64_t v = 0;
    if (protocol::parse_unsigned(field[i], 1, max, v) != protocol::Integer::ok)
      throw malformed(std::string("the ") + name + " field '" + protocol::printable(field[i]) +
                      "' is not a decimal integer in 1.." + std::to_string(max));
    return v;
  };
  ShmEndpoint ep;
  ep.segment = field[0];
  if (ep.segment.empty()) throw malformed("the segment field is empty");
  ep.pid = static_cast<int>(number(1, "pid", std::numeric_limits<int>::max()));
  ep.pid_namespace = field[2];
  if (ep.pid_namespace.empty()) throw malformed("the pid-namespace field is empty");
  ep.probe = number(3, "probe-address", std::numeric_limits<std::uint64_t>::max());
  ep.cookie = number(4, "cookie", std::numeric_limits<std::uint64_t>::max());
  return ep;
}

}  // namespace spark::transport
