// A key-value store that the caller hands to spark::init (the fourth bootstrap, for frameworks):
// torch's c10d Store, a Redis client, a file system... Each communicator made over a store gets
// its own connections, so a framework's sub-groups (torch.distributed.new_group) each get one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spark {

/// What libspark needs from the caller's store. Every rank of the group sees the same store;
/// calls may throw any std::exception (libspark reports it as spark::BootstrapError).
/// Keys libspark uses all start with "spark/"; give each communicator its own store or key
/// prefix (torch's PrefixStore does this per process group).
class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<std::byte>& value) = 0;
  /// The value under `key`, waiting up to `timeout` for some rank to set it; throws when the
  /// key is still absent after `timeout`.
  virtual std::vector<std::byte> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Adds `delta` to the integer counter under `key` (0 when absent) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  /// Whether `key` is set now (never waits).
  virtual bool contains(const std::string& key) = 0;
};

}  // namespace spark
