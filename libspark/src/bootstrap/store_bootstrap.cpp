// The fourth bootstrap: wire-up over a key-value store the caller hands in (torch's c10d Store).
// A fence is one blob per rank and one counter: each rank sets "spark/fence/E/R" (everything it
// put since the last fence), adds 1 to "spark/fence/E/arrived"; the rank that brings the count
// to the group size sets ".../done", the others wait for it, then every rank reads the others'
// blobs of epoch E. Keys of earlier epochs stay in the store (the caller's store lives as long
// as the group).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/node_layout.hpp"
#include "bootstrap/wire.hpp"
#include "spark/error.hpp"
#include "spark/store.hpp"

namespace spark::bootstrap {
namespace {

// One rank's entries, in the env rendezvous' own record format (wire.hpp, fence_ok: u32 n,
// n x (u32 rank, str key, bytes value)).
std::vector<std::byte> encode(int rank,
                              const std::map<std::string, std::vector<std::byte>>& entries) {
  wire::Writer w(wire::Type::fence_ok);
  w.u32(static_cast<std::uint32_t>(entries.size()));
  for (const auto& [key, value] : entries)
    w.u32(static_cast<std::uint32_t>(rank)).str(key).bytes(value);
  return w.finish();
}

class StoreBootstrap final : public Bootstrap {
 public:
  StoreBootstrap(std::shared_ptr<KeyValueStore> store, int rank, int size,
                 const config::Config& config)
      : store_(std::move(store)),
        rank_(rank),
        size_(size),
        node_id_(local_node_id(config)),
        join_timeout_(config.join_timeout_ms()) {
    put(kNodeIdKey, as_bytes(node_id_));
    commit();
    fence(join_timeout_);
    std::vector<std::string> ids;
    ids.reserve(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) ids.push_back(to_string(get(r, kNodeIdKey)));
    layout_ = derive_layout(ids, rank_);
  }

  std::string_view kind() const override { return "store"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return layout_.local_rank; }
  int local_size() const override { return layout_.local_size; }
  int node_rank() const override { return layout_.node_rank; }
  std::string node_id() const override { return node_id_; }

  void put(const std::string& key, std::span<const std::byte> value) override {
    std::vector<std::byte> v(value.begin(), value.end());
    entries_[{rank_, key}] = v;
    pending_[key] = std::move(v);
  }

  void commit() override {}  // the pending entries travel with the next fence

  void fence(std::chrono::milliseconds timeout) override {
    const auto prefix = fmt::format("spark/fence/{}/", ++epoch_);
    const auto blob = encode(rank_, pending_);
    pending_.clear();
    std::int64_t arrived = 0;
    guarded("set", [&] {
      store_->set(prefix + std::to_string(rank_), blob);
      arrived = store_->add(prefix + "arrived", 1);
      // One byte, not an empty value: torch 1.13's TCPStore answers a get of an empty value
      // ~200 ms late (measured: 210 ms vs 1-7 ms for one byte), which made every fence, and so
      // every dist.new_group of backend spark, cost 200-400 ms.
      if (arrived == size_) store_->set(prefix + "done", {std::byte{1}});
    });
    if (arrived < size_) {
      try {
        (void)store_->get(prefix + "done", timeout);
      } catch (const std::exception& e) {
        std::string missing;
        for (int r = 0; r < size_; ++r) {
          bool there = true;
          try {
            there = store_->contains(prefix + std::to_string(r));
          } catch (const std::exception&) {
          }
          if (!there) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
        throw BootstrapError(fmt::format(
            "store bootstrap: rank {}: fence {}: rank(s) {} did not arrive within {} ms ({}); "
            "every rank of the group must create it (SPARK_JOIN_TIMEOUT_MS sets the wait)",
            rank_, epoch_, missing.empty() ? "?" : missing, timeout.count(), e.what()));
      }
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::vector<std::byte> theirs;
      guarded("get", [&] { theirs = store_->get(prefix + std::to_string(r), timeout); });
      absorb(theirs, r);
    }
  }

  std::vector<std::byte> get(int rank, const std::string& key) override {
    if (rank < 0 || rank >= size_)
      throw InvalidUsage(fmt::format("bootstrap get: rank {} out of range 0..{}", rank, size_ - 1));
    const auto it = entries_.find({rank, key});
    if (it == entries_.end())
      throw BootstrapError(fmt::format(
          "store bootstrap: rank {} has not published \"{}\" (put + fence first)", rank, key));
    return it->second;
  }

  void abort(int status, const std::string& message) noexcept override {
    const int code = status == 0 ? 1 : status;
    try {
      const auto* m = reinterpret_cast<const std::byte*>(message.data());
      store_->set(fmt::format("spark/abort/{}", rank_), {m, m + message.size()});
    } catch (...) {
      // The report on stderr below is what counts.
    }
    std::fprintf(stderr, "spark: rank %d: aborting the job: %s\n", rank_, message.c_str());
    // Peers see this process's connections close and fail at once (cause peer_closed); a
    // launcher sees the exit status and stops the group.
    std::fflush(nullptr);
    _exit(code);
  }

 private:
  // Takes rank `r`'s blob of this epoch into the entries.
  void absorb(const std::vector<std::byte>& blob, int r) {
    try {
      if (blob.size() < 4) throw wire::ProtocolError("truncated");
      wire::Reader in(std::span<const std::byte>(blob).subspan(4));
      if (in.type() != wire::Type::fence_ok) throw wire::ProtocolError("not an entry list");
      const auto n = in.u32();
      for (std::uint32_t i = 0; i < n; ++i) {
        (void)in.u32();  // the writer's rank: the key it was stored under says it
        auto key = in.str();
        entries_[{r, std::move(key)}] = in.bytes();
      }
    } catch (const wire::ProtocolError&) {
      throw BootstrapError(fmt::format(
          "store bootstrap: rank {}'s entry in the key-value store is truncated: is another "
          "program using the same keys (spark/...)? give each communicator its own store prefix",
          r));
    }
  }

  template <class F>
  void guarded(const char* what, F&& f) {
    try {
      f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw BootstrapError(fmt::format(
          "store bootstrap: rank {}: the key-value store's {} failed: {}", rank_, what, e.what()));
    }
  }

  std::shared_ptr<KeyValueStore> store_;
  int rank_;
  int size_;
  std::string node_id_;
  std::chrono::milliseconds join_timeout_;
  NodeLayout layout_;
  std::map<std::pair<int, std::string>, std::vector<std::byte>> entries_;
  std::map<std::string, std::vector<std::byte>> pending_;
  std::uint64_t epoch_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_store_bootstrap(std::shared_ptr<KeyValueStore> store, int rank,
                                                int size, const config::Config& config) {
  if (!store) throw InvalidUsage("spark::init(store, rank, size): store is null");
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidUsage(fmt::format(
        "spark::init(store, rank, size): rank {} of size {} is out of range (0 <= rank < size)",
        rank, size));
  return std::make_unique<StoreBootstrap>(std::move(store), rank, size, config);
}

}  // namespace spark::bootstrap
