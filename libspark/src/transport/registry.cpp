#include "transport/registry.hpp"

#include <algorithm>

#include "spark/error.hpp"

namespace spark::transport {

#define SPARK_TRANSPORT_FACTORY(name, local, doc) \
  std::unique_ptr<Transport> make_##name(const Setup& setup);
SPARK_TRANSPORTS(SPARK_TRANSPORT_FACTORY)
#undef SPARK_TRANSPORT_FACTORY

namespace {
#define SPARK_TRANSPORT_ROW(name, local, doc) {#name, local, &make_##name},
constexpr TransportKind kKinds[] = {SPARK_TRANSPORTS(SPARK_TRANSPORT_ROW)};
#undef SPARK_TRANSPORT_ROW
}  // namespace

std::span<const TransportKind> transport_kinds() noexcept {
  return kKinds;
}

const TransportKind& choose_transport(std::string_view wanted, bool same_node) {
  if (wanted == "auto") wanted = same_node ? "shm" : "tcp";
  const auto it = std::find_if(std::begin(kKinds), std::end(kKinds),
                               [&](const TransportKind& k) { return k.name == wanted; });
  if (it == std::end(kKinds))  // the knob table only lets registered names through
    throw ConfigError("SPARK_TRANSPORT=" + std::string(wanted) + " is not a transport");
  return *it;
}

}  // namespace spark::transport
