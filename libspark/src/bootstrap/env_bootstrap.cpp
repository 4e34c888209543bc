#include "bootstrap/env_bootstrap.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "bootstrap/node_layout.hpp"
#include "bootstrap/store_client.hpp"
#include "bootstrap/store_server.hpp"
#include "bootstrap/wire.hpp"
#include "spark/error.hpp"

namespace spark::bootstrap {
namespace {

using Clock = std::chrono::steady_clock;
// A server answer to a fence may arrive a little after the fence's own deadline.
constexpr auto kReplyGrace = std::chrono::seconds(5);

std::pair<std::string, std::uint16_t> split_host_port(const std::string& hp) {
  const auto colon = hp.rfind(':');
  std::string host = hp.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [v6]:port
  }
  return {host, static_cast<std::uint16_t>(std::stoul(hp.substr(colon + 1)))};
}

class EnvBootstrap final : public Bootstrap {
 public:
  EnvBootstrap(const EnvParams& params, const config::Config& config)
      : params_(params),
        node_id_(local_node_id(config)),
        job_id_(config.value("SPARK_JOB_ID").value_or("")),
        join_timeout_(config.join_timeout_ms()) {
    if (params_.size > 1) connect();
    // Exchange node ids: local rank and size follow from them.
    put(kNodeIdKey, as_bytes(node_id_));
    commit();
    fence(join_timeout_);
    std::vector<std::string> ids;
    ids.reserve(static_cast<std::size_t>(params_.size));
    for (int r = 0; r < params_.size; ++r) ids.push_back(to_string(get(r, kNodeIdKey)));
    layout_ = derive_layout(ids, params_.rank);
  }

  ~EnvBootstrap() override {
    if (client_) {
      try {
        client_->send(wire::Writer(wire::Type::bye).finish(),
                      Clock::now() + std::chrono::seconds(1));
      } catch (const std::exception&) {
        // Rank 0 already gone: nothing left to tell it.
      }
      client_->close();
    }
    if (server_) {
      // Keep serving until nobody still needs an answer, so that a rank 0 that finishes
      // first does not pull the store from under the others mid-reply.
      (void)server_->drain(join_timeout_);
    }
  }

  std::string_view kind() const override { return "env"; }
  int rank() const override { return params_.rank; }
  int size() const override { return params_.size; }
  int local_rank() const override { return layout_.local_rank; }
  int local_size() const override { return layout_.local_size; }
  int node_rank() const override { return layout_.node_rank; }
  std::string node_id() const override { return node_id_; }

  void put(const std::string& key, std::span<const std::byte> value) override {
    std::vector<std::byte> v(value.begin(), value.end());
    entries_[{params_.rank, key}] = v;
    pending_[key] = std::move(v);
  }

  void commit() override {
    if (!client_) {
      pending_.clear();
      return;
    }
    const auto deadline = Clock::now() + join_timeout_;
    for (const auto& [key, value] : pending_) {
      client_->send(wire::Writer(wire::Type::put).str(key).bytes(value).finish(), deadline);
    }
    pending_.clear();
  }

  void fence(std::chrono::milliseconds timeout) override {
    if (!client_) return;
    ++epoch_;
    const auto ms = static_cast<std::uint32_t>(
        std::clamp<std::int64_t>(timeout.count(), 1, std::numeric_limits<std::uint32_t>::max()));
    client_->send(wire::Writer(wire::Type::fence).u64(epoch_).u32(ms).finish(),
                  Clock::now() + timeout);
    std::vector<std::byte> body;
    if (!client_->receive(body, Clock::now() + timeout + kReplyGrace)) {
      throw BootstrapError(fmt::format(
          "env rendezvous: rank {}: fence {} got no answer from rank 0 at {} within {} ms: rank 0 "
          "is stuck or unreachable",
          params_.rank, epoch_, client_->address(), ms));
    }
    wire::Reader in(body);
    switch (in.type()) {
      case wire::Type::fence_ok: {
        const auto n = in.u32();
        for (std::uint32_t i = 0; i < n; ++i) {
          const auto r = static_cast<int>(in.u32());
          auto key = in.str();
          entries_[{r, std::move(key)}] = in.bytes();
        }
        return;
      }
      case wire::Type::fence_fail:
        throw BootstrapError(fmt::format("env rendezvous at {}: rank {}: {}", client_->address(),
                                         params_.rank, in.str()));
      default:
        throw BootstrapError(
            fmt::format("env rendezvous: unexpected answer from {}", client_->address()));
    }
  }

  std::vector<std::byte> get(int rank, const std::string& key) override {
    if (rank < 0 || rank >= params_.size) {
      throw InvalidUsage(
          fmt::format("bootstrap get: rank {} out of range 0..{}", rank, params_.size - 1));
    }
    const auto it = entries_.find({rank, key});
    if (it == entries_.end()) {
      throw BootstrapError(fmt::format(
          "env rendezvous: rank {} has not published \"{}\" (put + commit + fence first)", rank,
          key));
    }
    return it->second;
  }

  void abort(int status, const std::string& message) noexcept override {
    const int code = status == 0 ? 1 : status;
    if (client_) {
      try {
        client_->send(wire::Writer(wire::Type::abort)
                          .u32(static_cast<std::uint32_t>(code))
                          .str(message)
                          .finish(),
                      Clock::now() + std::chrono::seconds(1));
      } catch (...) {
        // The report on stderr below is what counts.
      }
    }
    std::fprintf(stderr, "spark: rank %d: aborting the job: %s\n", params_.rank, message.c_str());
    std::fflush(stderr);
    // Peers see this process's connections close and fail at once (cause peer_closed).
    std::fflush(nullptr);  // keep what the application printed before the abort
    _exit(code);
  }

 private:
  void connect() {
    const auto deadline = Clock::now() + join_timeout_;
    std::string host = params_.host;
    if (params_.rank == 0) {
      server_ = std::make_unique<StoreServer>(params_.port, params_.size, job_id_);
      host = "127.0.0.1";  // rank 0 reaches its own store on loopback
    }
    client_ = std::make_unique<StoreClient>(host, params_.port, deadline, join_timeout_);
    client_->send(wire::Writer(wire::Type::hello)
                      .u32(static_cast<std::uint32_t>(params_.rank))
                      .u32(static_cast<std::uint32_t>(params_.size))
                      .str(job_id_)
                      .finish(),
                  deadline);
    std::vector<std::byte> body;
    if (!client_->receive(body, deadline + kReplyGrace)) {
      throw BootstrapError(
          fmt::format("env rendezvous: {} accepted the connection but did not "
                      "answer: is it a libspark rendezvous (rank 0)?",
                      client_->address()));
    }
    wire::Reader in(body);
    const auto type = in.type();
    if (type == wire::Type::error) {
      throw BootstrapError(fmt::format("env rendezvous at {}: {}", client_->address(), in.str()));
    }
    if (type != wire::Type::welcome) {
      throw BootstrapError(
          fmt::format("env rendezvous: unexpected answer from {}", client_->address()));
    }
  }

  EnvParams params_;
  std::string node_id_;
  std::string job_id_;
  std::chrono::milliseconds join_timeout_;
  NodeLayout layout_;
  // Declared before client_ so that rank 0's client is closed before its server stops.
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> client_;
  std::map<std::pair<int, std::string>, std::vector<std::byte>> entries_;
  std::map<std::string, std::vector<std::byte>> pending_;
  std::uint64_t epoch_ = 0;
};

}  // namespace

std::optional<EnvParams> env_params(const config::Config& config) {
  EnvParams p;
  if (config.integer("SPARK_RANK") &&
      config.integer("SPARK_SIZE")) {  // Config guarantees both or neither
    p.rank = *config.integer("SPARK_RANK");
    p.size = *config.integer("SPARK_SIZE");
  } else if (config.integer("RANK") || config.integer("WORLD_SIZE")) {
    if (!config.integer("RANK") || !config.integer("WORLD_SIZE")) {
      throw ConfigError(fmt::format(
          "{} is set but {} is not: torchrun-style launches need both RANK and WORLD_SIZE "
          "(or use SPARK_RANK and SPARK_SIZE)",
          config.integer("RANK") ? "RANK" : "WORLD_SIZE",
          config.integer("RANK") ? "WORLD_SIZE" : "RANK"));
    }
    p.rank = *config.integer("RANK");
    p.size = *config.integer("WORLD_SIZE");
  } else {
    return std::nullopt;
  }
  if (p.size == 1) return p;
  if (auto hp = config.value("SPARK_RENDEZVOUS")) {
    std::tie(p.host, p.port) = split_host_port(*hp);
    p.origin = "SPARK_RENDEZVOUS";
  } else if (config.value("MASTER_ADDR") && config.integer("MASTER_PORT")) {
    p.host = *config.value("MASTER_ADDR");
    p.port = static_cast<std::uint16_t>(*config.integer("MASTER_PORT"));
    p.origin = "MASTER_ADDR/MASTER_PORT";
  } else {
    throw ConfigError(fmt::format(
        "rank {} of {} has no rendezvous address: set SPARK_RENDEZVOUS=HOST:PORT (rank 0's host "
        "and a free port; rank 0 listens there) or MASTER_ADDR and MASTER_PORT",
        p.rank, p.size));
  }
  return p;
}

std::unique_ptr<Bootstrap> make_env_bootstrap(const config::Config& config) {
  auto params = env_params(config);
  if (!params) {
    throw ConfigError(
        "SPARK_BOOTSTRAP=env needs SPARK_RANK and SPARK_SIZE (or RANK and WORLD_SIZE), plus "
        "SPARK_RENDEZVOUS=HOST:PORT (or MASTER_ADDR and MASTER_PORT) when there is more than "
        "one rank");
  }
  return std::make_unique<EnvBootstrap>(*params, config);
}

}  // namespace spark::bootstrap
