// A rank's connection to the rendezvous store: blocking calls, each with a deadline (Asio
// asynchronous operations driven by a private io_context, so a dead server never hangs a rank).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace spark::bootstrap {

class StoreClient {
 public:
  using Clock = std::chrono::steady_clock;

  /// Connects to host:port, retrying refused/unreachable attempts until `deadline`.
  /// Throws spark::BootstrapError naming the address, the last error and the timeout.
  StoreClient(const std::string& host, std::uint16_t port, Clock::time_point deadline,
              std::chrono::milliseconds timeout_for_message);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Sends one complete frame (from wire::Writer). Throws BootstrapError.
  void send(const std::vector<std::byte>& frame, Clock::time_point deadline);
  /// Receives one frame body. Returns false on timeout; throws BootstrapError when the
  /// connection breaks.
  bool receive(std::vector<std::byte>& body, Clock::time_point deadline);
  void close() noexcept;

  const std::string& address() const noexcept { return address_; }

 private:
  /// Runs the io_context until `done` or `deadline`; on timeout cancels and returns false.
  bool run_until(const bool& done, Clock::time_point deadline);

  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  std::string address_;
};

}  // namespace spark::bootstrap
