// The environment rendezvous: SPARK_RANK/SPARK_SIZE/SPARK_RENDEZVOUS or torchrun's
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT. Rank 0 serves the store (StoreServer) and, like
// every rank, talks to it as a client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "bootstrap/bootstrap.hpp"

namespace spark::bootstrap {

/// What the environment says, after the cross-checks (throws spark::ConfigError).
struct EnvParams {
  int rank = 0;
  int size = 1;
  std::string host;        ///< rendezvous host ("" when size == 1)
  std::uint16_t port = 0;  ///< rendezvous port
  std::string origin;      ///< "SPARK_RENDEZVOUS" or "MASTER_ADDR/MASTER_PORT", for messages
};

/// nullopt when neither SPARK_RANK/SPARK_SIZE nor RANK/WORLD_SIZE are set.
std::optional<EnvParams> env_params(const config::Config& config);

}  // namespace spark::bootstrap
