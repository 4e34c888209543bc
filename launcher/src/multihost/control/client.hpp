// The node daemon's side of the control plane: one blocking TCP connection to the
// launcher. receive() runs on the daemon's link thread; send() may be called from any
// thread (PMIx's fence hook, the node runner's failure hook, the main thread).
#pragma once

#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "control/auth.hpp"
#include "control/wire.hpp"

namespace spark::launch::control {

/// The link is gone or the launcher misbehaved.
class LinkError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ControlClient {
 public:
  /// Connects to host:port within `timeout`. Throws LinkError.
  ControlClient(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  /// Proves our knowledge of the secret and checks the launcher's. Throws LinkError.
  void handshake(const Secret& secret, const std::string& job_id, std::uint32_t node,
                 std::chrono::milliseconds timeout);
  /// The next frame, or nullopt when none arrived within `timeout`. Throws LinkError when
  /// the connection ended or sent garbage.
  std::optional<Frame> receive(std::chrono::milliseconds timeout);
  /// Sends one frame (thread-safe). Throws LinkError.
  void send(MsgType type, const std::string& payload);
  /// This end's IPv4 address ("10.0.0.2"): the daemon's interface towards the launcher.
  std::string local_address() const;
  /// Unblocks receive() (it then throws LinkError) and stops sending.
  void shutdown() noexcept;

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  FrameDecoder decoder_;
  std::mutex send_mutex_;
};

}  // namespace spark::launch::control
