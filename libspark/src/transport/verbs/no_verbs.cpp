// Built instead of the verbs transport when libibverbs was not found at configure time.
#include <memory>

#include "spark/error.hpp"
#include "transport/transport.hpp"

namespace spark::transport {

bool roce_built() noexcept {
  return false;
}

std::unique_ptr<Transport> make_roce(const Setup&) {
  throw ConfigError(
      "SPARK_TRANSPORT=roce: this libspark was built without ibverbs (install libibverbs-dev and "
      "rebuild); use SPARK_TRANSPORT=auto, tcp or shm");
}

}  // namespace spark::transport
