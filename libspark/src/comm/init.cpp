#include <fmt/format.h>

#include <chrono>

#include "comm/communicator_impl.hpp"
#include "log/log.hpp"
#include "spark/spark.hpp"

namespace spark {
namespace {

using Clock = std::chrono::steady_clock;

// SPARK_LOG's logger for this process: the level, and who writes (the launcher's name for the
// node, the rank when the launcher gave it; the bootstrap's answer replaces it).
void start_log(const config::Config& config) {
  log::configure(config);
  if (auto host = config.value("SPARK_HOST")) log::set_host(*host);
  if (auto rank = config.integer("SPARK_RANK")) log::set_rank(*rank);
  if (log::enabled(log::Level::trace, "bootstrap"))
    log::line("bootstrap",
              fmt::format("choosing: SPARK_BOOTSTRAP={}, started by a PMIx server: {}",
                          *config.value("SPARK_BOOTSTRAP"), config.pmix_present() ? "yes" : "no"));
}

std::unique_ptr<bootstrap::Bootstrap> logged(std::unique_ptr<bootstrap::Bootstrap> boot,
                                             Clock::time_point t0) {
  log::set_rank(boot->rank());
  if (log::enabled(log::Level::info, "bootstrap"))
    log::line("bootstrap",
              fmt::format("{}: rank {} of {} on node {} (node rank {}, local rank {} of {}) in "
                          "{:.1f} ms",
                          boot->kind(), boot->rank(), boot->size(), boot->node_id(),
                          boot->node_rank(), boot->local_rank(), boot->local_size(),
                          std::chrono::duration<double, std::milli>(Clock::now() - t0).count()));
  return boot;
}

}  // namespace

Communicator init() {
  const auto config = config::Config::from_environment();
  start_log(config);
  const auto t0 = Clock::now();
  auto boot = logged(bootstrap::make_bootstrap(config), t0);
  return Communicator(
      std::make_unique<CommunicatorImpl>(std::move(boot), CommOptions::from_config(config)));
}

Communicator init(std::shared_ptr<KeyValueStore> store, int rank, int size) {
  const auto config = config::Config::from_environment();
  start_log(config);
  log::set_rank(rank);
  const auto t0 = Clock::now();
  auto boot = logged(bootstrap::make_store_bootstrap(std::move(store), rank, size, config), t0);
  return Communicator(
      std::make_unique<CommunicatorImpl>(std::move(boot), CommOptions::from_config(config)));
}

}  // namespace spark
