#include "comm/communicator_impl.hpp"
#include "spark/spark.hpp"

namespace spark {

Communicator init() {
  const auto config = config::Config::from_environment();
  auto boot = bootstrap::make_bootstrap(config);
  return Communicator(
      std::make_unique<CommunicatorImpl>(std::move(boot), CommOptions::from_config(config)));
}

Communicator init(std::shared_ptr<KeyValueStore> store, int rank, int size) {
  const auto config = config::Config::from_environment();
  auto boot = bootstrap::make_store_bootstrap(std::move(store), rank, size, config);
  return Communicator(
      std::make_unique<CommunicatorImpl>(std::move(boot), CommOptions::from_config(config)));
}

}  // namespace spark
