// The launcher's side of the control plane: accepts one TCP connection per node daemon,
// authenticates it (auth.hpp), then hands its messages to the coordinator. Everything runs
// on the caller's io_context (one thread). A connection that sends anything unknown,
// malformed, oversized, unauthenticated or late is logged and closed; it never throws out
// of the io_context and never blocks the other connections.
#pragma once

#include <utility>  // before Asio: Boost 1.74 needs std::exchange declared

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "control/auth.hpp"
#include "control/wire.hpp"

namespace spark::launch::control {

class ServerSession;

class ControlServer {
 public:
  struct Callbacks {
    std::function<void(std::uint32_t node)> authenticated;
    /// A frame from an authenticated daemon (heartbeats are handled here). May throw
    /// ProtocolError: the connection is then closed and `lost` is called.
    std::function<void(std::uint32_t node, const Frame& frame)> message;
    /// An authenticated connection ended (closed, broken, silent too long, protocol error).
    std::function<void(std::uint32_t node, const std::string& reason)> lost;
    /// One line for stderr (rejected connections).
    std::function<void(const std::string& line)> log;
  };
  struct Settings {
    std::chrono::milliseconds handshake_timeout{10000};
    std::chrono::milliseconds heartbeat{1000};
    std::chrono::milliseconds link_timeout{10000};
    std::size_t max_pending = 64;  // unauthenticated connections at once
  };

  ControlServer(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& listen,
                const Secret& secret, std::string job_id, std::uint32_t nodes, Callbacks callbacks,
                Settings settings);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  /// Queues a frame for an authenticated node; false when it is not connected.
  bool send(std::uint32_t node, MsgType type, const std::string& payload);
  /// Closes a node's connection without calling `lost`.
  void close(std::uint32_t node);
  /// Stops accepting and closes every connection (no `lost` calls).
  void stop();
  bool connected(std::uint32_t node) const { return nodes_.count(node) != 0; }
  /// Connections rejected so far (tests and --verbose).
  std::size_t rejected() const { return rejected_; }

 private:
  friend class ServerSession;
  void accept();
  void on_heartbeat_timer();
  void session_rejected(ServerSession* s, const std::string& reason);
  bool session_authenticated(const std::shared_ptr<ServerSession>& s, std::uint32_t node);
  void session_lost(ServerSession* s, const std::string& reason);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer heartbeat_timer_;
  Secret secret_;
  std::string job_id_;
  std::uint32_t node_count_;
  Callbacks cb_;
  Settings settings_;
  std::map<ServerSession*, std::shared_ptr<ServerSession>> pending_;
  std::map<std::uint32_t, std::shared_ptr<ServerSession>> nodes_;
  std::size_t rejected_ = 0;
  bool stopped_ = false;
};

}  // namespace spark::launch::control
