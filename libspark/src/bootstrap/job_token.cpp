#include "bootstrap/job_token.hpp"

#include "spark/error.hpp"

namespace spark::bootstrap {

namespace {
constexpr const char* kKey = "spark.token";
}

void publish_job_token(Bootstrap& boot) {
  if (boot.rank() == 0) boot.put(kKey, as_bytes(net::hello::to_hex(net::hello::random_token())));
}

net::hello::Token job_token(Bootstrap& boot) {
  const auto token = net::hello::from_hex(to_string(boot.get(0, kKey)));
  if (!token) throw BootstrapError("rank 0's job token (" + std::string(kKey) + ") is malformed");
  return *token;
}

}  // namespace spark::bootstrap
