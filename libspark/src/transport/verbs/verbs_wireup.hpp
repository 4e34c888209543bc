// How the communicator wires up the RoCE transport (SPARK_TRANSPORT=roce), in two calls
// around its bootstrap fence, so that comm/wireup.cpp needs only a few lines:
//
//   auto roce = transport::start_roce(*boot_, rank_, size_, peers, options_.timeout_ms,
//                                     options_.slots, slot_bytes);   // puts "spark.roce"
//   boot_->commit(); boot_->fence(join);
//   transport::finish_roce(*boot_, *roce, peers);                     // connects every QP
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "config/config.hpp"
#include "transport/verbs/verbs_transport.hpp"

namespace spark::transport {

/// Lanes from SPARK_LANES (set by sparkrun from the binding plan), else SPARK_IB_HCA, else
/// every device with an active port; SPARK_IB_GID_INDEX; the QP timing from `timeout_ms`.
VerbsOptions verbs_options(const config::Config& config, std::uint32_t timeout_ms,
                           std::size_t slots, std::size_t slot_bytes);

/// Creates the transport (options from config::Config::from_environment()) and puts its
/// endpoint under the key "spark.roce". The caller commits and fences.
std::unique_ptr<VerbsTransport> start_roce(bootstrap::Bootstrap& boot, int rank, int size,
                                           const std::vector<int>& peers, std::uint32_t timeout_ms,
                                           std::size_t slots, std::size_t slot_bytes);

/// After the fence: reads every peer's "spark.roce" and connects the queue pairs.
void finish_roce(bootstrap::Bootstrap& boot, VerbsTransport& transport,
                 const std::vector<int>& peers);

}  // namespace spark::transport
