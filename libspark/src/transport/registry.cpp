#include "transport/registry.hpp"

#include <algorithm>

#include "spark/config/config.hpp"
#include "spark/error.hpp"
#include "transport/tcp/tcp_transport.hpp"
#include "transport/verbs/roce_choice.hpp"

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

void publish_choice_facts(bootstrap::Bootstrap& boot, const CommOptions& options,
                          bool several_nodes) {
  if (roce_built()) publish_rdma_facts(boot, options, several_nodes);
}

std::vector<const TransportKind*> choose_transports(const Setup& base,
                                                    std::vector<std::string>* notes,
                                                    std::vector<std::string>* report) {
  const std::string& wanted = base.options->transport;
  const auto job = roce_built() ? roce_job(base) : std::nullopt;
  // A mixed job that tcp's own map cannot serve would end in a missing key or a relay's
  // connect timeout; every rank finds this alike before any fence and says so at once.
  if (job && wanted == "auto" && learns_fabric_map(base))
    if (const auto why = job->mixed_tcp_map_problem(); !why.empty())
      throw ConfigError("SPARK_DATA_NET is set and this job mixes roce and tcp: " + why +
                        ". Run it on one transport (SPARK_TRANSPORT=tcp: every pair on the tcp "
                        "map, relays included) or unset SPARK_DATA_NET (tcp pairs then connect "
                        "directly, without the map)");
  const auto& me = base.nodes[static_cast<std::size_t>(base.rank)];
  std::vector<const TransportKind*> out(static_cast<std::size_t>(base.size), nullptr);
  for (int r = 0; r < base.size; ++r) {
    if (r == base.rank) continue;
    const bool same = base.nodes[static_cast<std::size_t>(r)] == me;
    const TransportKind* kind = &choose_transport(wanted, same);
    std::string line;
    if (job && !same) {
      const auto c = job->peer(base.rank, r);
      if (wanted == "auto" && c.kind != fabric::RocePeer::Kind::tcp)
        kind = &choose_transport("roce", false);
      line = job->describe(base.rank, r, c);
    }
    if (report != nullptr)
      report->push_back("rank " + std::to_string(base.rank) + " -> rank " + std::to_string(r) +
                        ": " + std::string(kind->name) + (line.empty() ? "" : " [" + line + "]"));
    out[static_cast<std::size_t>(r)] = kind;
  }
  if (notes != nullptr && job && wanted == "auto") {
    const bool none =
        std::all_of(job->lanes.begin(), job->lanes.end(), [](const auto& l) { return l.empty(); });
    if (none) {
      notes->push_back("tcp between all " + std::to_string(job->map.size()) +
                       " nodes: none has an RDMA lane (an RDMA device with an IPv4 RoCE v2 GID; "
                       "`sparkrun doctor` says why)");
    } else {
      for (int a = 0; a < job->map.size(); ++a)
        for (int b = a + 1; b < job->map.size(); ++b) {
          auto c = fabric::choose_roce_peer(job->map, job->lanes, job->hosts, a, b, {}, {});
          if (c.kind == fabric::RocePeer::Kind::tcp)
            notes->push_back(fabric::describe_roce_peer(c, job->lanes, job->hosts, a, b));
        }
    }
  }
  return out;
}

bool may_fall_back(const Setup& base) {
  if (base.options == nullptr || base.options->transport != "auto" || !roce_built()) return false;
  const auto job = roce_job(base);
  return job && job->any_roce();
}

}  // namespace spark::transport
