// A job of one rank: the store is a local map and fences return at once.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/node_layout.hpp"
#include "spark/error.hpp"

namespace spark::bootstrap {
namespace {

class SingletonBootstrap final : public Bootstrap {
 public:
  explicit SingletonBootstrap(const config::Config& config) : node_id_(local_node_id(config)) {}

  std::string_view kind() const override { return "singleton"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  int node_rank() const override { return 0; }
  std::string node_id() const override { return node_id_; }

  void put(const std::string& key, std::span<const std::byte> value) override {
    entries_[key].assign(value.begin(), value.end());
  }
  void commit() override {}
  void fence(std::chrono::milliseconds) override {}
  std::vector<std::byte> get(int rank, const std::string& key) override {
    if (rank != 0) {
      throw InvalidUsage(fmt::format("bootstrap get: rank {} out of range 0..0", rank));
    }
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      throw BootstrapError(fmt::format("singleton: \"{}\" was never published", key));
    }
    return it->second;
  }
  void abort(int status, const std::string& message) noexcept override {
    std::fprintf(stderr, "spark: rank 0: aborting: %s\n", message.c_str());
    std::fflush(nullptr);
    _exit(status == 0 ? 1 : status);
  }

 private:
  std::string node_id_;
  std::map<std::string, std::vector<std::byte>> entries_;
};

}  // namespace

std::unique_ptr<Bootstrap> make_singleton_bootstrap(const config::Config& config) {
  return std::make_unique<SingletonBootstrap>(config);
}

}  // namespace spark::bootstrap
