// The environment rendezvous key-value store served by rank 0 (Boost.Asio, one background
// thread). Ranks HELLO, PUT their entries, and FENCE; a fence completes when every rank has
// reached it and returns every committed entry. A fence that cannot complete (timeout, a rank
// that disconnected, an abort) is answered with a message naming the ranks that are missing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace spark::bootstrap {

class StoreServer {
 public:
  /// Listens on 0.0.0.0:port (port 0 = any; see port()). Throws spark::BootstrapError.
  StoreServer(std::uint16_t port, int size, std::string job_id);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  std::uint16_t port() const noexcept { return port_; }

  /// Called by rank 0 after its own client has said BYE: keeps serving until no rank still
  /// needs an answer (every rank left, or the others are idle and their replies, e.g. "fence
  /// cannot complete: rank 0 left", are flushed), or until timeout. True when drained.
  bool drain(std::chrono::milliseconds timeout);

 private:
  struct State;
  std::uint16_t port_ = 0;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace spark::bootstrap
