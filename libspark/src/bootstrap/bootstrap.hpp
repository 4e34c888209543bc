// How ranks find each other before any transport exists: a PMIx client, an environment
// rendezvous over TCP (SPARK_RANK/SPARK_SIZE/SPARK_RENDEZVOUS or torchrun's variables), or a
// singleton. One Bootstrap per process; put/commit/fence/get form a small key-value exchange
// used to publish transport endpoints.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spark/config/config.hpp"
#include "spark/store.hpp"

namespace spark::bootstrap {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual std::string_view kind() const = 0;  ///< "pmix" | "env" | "singleton" | "store"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int node_rank() const = 0;  ///< index of this rank's node
  /// Identity of this rank's node (SPARK_HOST, PMIx hostname, or hostname).
  virtual std::string node_id() const = 0;
  /// Publishes `value` under `key` for this rank; visible to others after commit() + fence().
  virtual void put(const std::string& key, std::span<const std::byte> value) = 0;
  virtual void commit() = 0;
  /// Collective: returns once every rank has called fence() (and its committed data is
  /// readable). Throws spark::BootstrapError naming the ranks that did not arrive in time.
  virtual void fence(std::chrono::milliseconds timeout) = 0;
  /// The value `rank` published under `key` (throws spark::BootstrapError when absent).
  virtual std::vector<std::byte> get(int rank, const std::string& key) = 0;
  /// Group abort (PMIx_Abort or equivalent); `message` is the one-line failure report.
  /// Does not return: after reporting, the process exits with `status` (1 when 0).
  /// pmix: PMIx_Abort (the launcher ends every rank and prints the message);
  /// env: rank 0's store is told, the message goes to stderr, the peers see the connections
  /// of this process close and fail at once; singleton: stderr.
  virtual void abort(int status, const std::string& message) noexcept = 0;
  /// Whether abort() has a launcher end every rank (pmix: sparkrun, srun) and print the
  /// message of the first rank that reported; the others leave it to their peers to notice.
  virtual bool abort_ends_the_group() const noexcept { return false; }
};

/// PMIx (when PMIX_RANK / PMIX_NAMESPACE are set), then env rendezvous (SPARK_RANK/SPARK_SIZE
/// or RANK/WORLD_SIZE), then singleton; SPARK_BOOTSTRAP forces one. Throws spark::ConfigError
/// or spark::BootstrapError.
std::unique_ptr<Bootstrap> make_bootstrap(const config::Config& config);

/// The individual kinds (tests, and forced selection). make_pmix_bootstrap throws
/// spark::BootstrapError when libspark was built without PMIx.
std::unique_ptr<Bootstrap> make_pmix_bootstrap(const config::Config& config);
std::unique_ptr<Bootstrap> make_env_bootstrap(const config::Config& config);
std::unique_ptr<Bootstrap> make_singleton_bootstrap(const config::Config& config);
/// Over a key-value store the caller hands in (spark::init(store, rank, size)); throws
/// spark::InvalidUsage for a null store or a rank out of range.
std::unique_ptr<Bootstrap> make_store_bootstrap(std::shared_ptr<KeyValueStore> store, int rank,
                                                int size, const config::Config& config);

/// Whether this build of libspark has the PMIx client.
bool pmix_available() noexcept;

/// Convenience for string payloads.
inline std::span<const std::byte> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}
inline std::string to_string(const std::vector<std::byte>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size()};
}

}  // namespace spark::bootstrap
