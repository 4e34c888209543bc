// The environment rendezvous key-value store served by rank 0 (Boost.Asio, one background
// thread). Ranks HELLO, PUT their entries, and FENCE; a fence completes when every rank has
// reached it and returns every committed entry. A fence that cannot complete (timeout, a rank
// that disconnected, an abort) is answered with a message naming the ranks that are missing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
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

  /// Waits until every rank has joined and then left (BYE or disconnect), or until timeout.
  /// Keeps rank 0's process serving while other ranks still use the store. True when all left.
  bool wait_until_all_left(std::chrono::milliseconds timeout);

 private:
  struct State;
  std::uint16_t port_ = 0;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace spark::bootstrap
