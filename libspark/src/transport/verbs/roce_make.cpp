// make_roce for the registry (transport/registry.hpp), built into libspark with the verbs
// transport (no_verbs.cpp otherwise): across nodes the links follow the job's per-peer lane
// choice (roce_choice.hpp) and a node's first rank may relay (roce_setup.hpp).
#include "log/log.hpp"
#include "transport/registry.hpp"
#include "transport/verbs/roce_choice.hpp"
#include "transport/verbs/roce_setup.hpp"

namespace spark::transport {

bool roce_built() noexcept {
  return true;
}

std::unique_ptr<Transport> make_roce(const Setup& s) {
  // Across nodes each peer's links follow the fabric map (fabric/roce_lanes.hpp); the first rank
  // of a node on a relay route also relays for the pairs the map sends through it.
  const auto job = roce_job(s);
  auto o = roce_options(verbs_options(*s.options), job ? &*job : nullptr, s.rank, s.peers);
  o.fall_back = s.options->transport == "auto";  // tcp reaches a peer no RDMA probe reached
  auto t = std::make_unique<VerbsTransport>(s.rank, s.size, s.peers, o);
  if (job) t->adopt_relay(start_relay(*s.boot, *job, s.rank, std::move(o)));
  if (t->relay() != nullptr) t->relay()->set_report(log::enabled(log::Level::info, "wireup"));
  return t;
}

}  // namespace spark::transport
