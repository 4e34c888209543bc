// Picks the bootstrap: PMIx, then the environment rendezvous, then a single rank.
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/env_bootstrap.hpp"
#include "spark/error.hpp"

namespace spark::bootstrap {

bool pmix_available() noexcept {
#ifdef SPARK_HAVE_PMIX
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Bootstrap> make_bootstrap(const config::Config& config) {
  switch (config.bootstrap()) {
    case config::BootstrapKind::pmix:
      return make_pmix_bootstrap(config);
    case config::BootstrapKind::env:
      return make_env_bootstrap(config);
    case config::BootstrapKind::singleton:
      return make_singleton_bootstrap(config);
    case config::BootstrapKind::auto_select:
      break;
  }
  if (config.pmix_present()) {
    if (pmix_available()) return make_pmix_bootstrap(config);
    // Started by a PMIx server but built without PMIx: the env rendezvous can still work
    // when its variables are complete; otherwise say why nothing fits.
    if (!config.value("SPARK_RENDEZVOUS") && !config.value("MASTER_ADDR")) {
      throw BootstrapError(
          "this process was started by a PMIx server (PMIX_RANK/PMIX_NAMESPACE are set) but "
          "libspark was built without PMIx: rebuild with libpmix-dev installed "
          "(-DSPARK_ENABLE_PMIX=ON), or launch with SPARK_RANK, SPARK_SIZE and "
          "SPARK_RENDEZVOUS");
    }
  }
  if (env_params(config)) return make_env_bootstrap(config);
  return make_singleton_bootstrap(config);
}

}  // namespace spark::bootstrap
