#include "control/server.hpp"

#include <deque>

#include "control/messages.hpp"

namespace spark::launch::control {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class ServerSession : public std::enable_shared_from_this<ServerSession> {
 public:
  ServerSession(ControlServer& server, tcp::socket socket)
      : server_(server), socket_(std::move(socket)), timer_(socket_.get_executor()) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer")
               : ep.address().to_string() + ":" + std::to_string(ep.port());
    socket_.set_option(tcp::no_delay(true), ec);
  }

  void start() {
    nonce_ = random_nonce();
    write(MsgType::kChallenge, encode(Challenge{nonce_}));
    timer_.expires_after(server_.settings_.handshake_timeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && !self->authenticated_ && !self->closed_) {
        self->fail("no authentication within " +
                   std::to_string(self->server_.settings_.handshake_timeout.count()) + " ms");
      }
    });
    read();
  }

  void write(MsgType type, const std::string& payload) {
    if (closed_) return;
    queue_.push_back(encode_frame(type, payload));
    if (queue_.size() == 1) write_next();
  }

  // Closes without telling the server (the server already forgot us).
  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  const std::string& peer() const { return peer_; }
  std::uint32_t node() const { return node_; }
  bool authenticated() const { return authenticated_; }
  Clock::time_point last_rx() const { return last_rx_; }

  // A protocol or I/O failure: tell the server once, then close.
  void fail(const std::string& reason) {
    if (closed_) return;
    auto keep = shared_from_this();
    if (authenticated_) {
      server_.session_lost(this, reason);
    } else {
      server_.session_rejected(this, reason);
    }
    close();
  }

 private:
  void write_next() {
    asio::async_write(
        socket_, asio::buffer(queue_.front()),
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
          if (self->closed_) return;
          if (ec) return self->fail("write failed: " + ec.message());
          self->queue_.pop_front();
          if (!self->queue_.empty()) self->write_next();
        });
  }

  void read() {
    socket_.async_read_some(
        asio::buffer(buf_),
        [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
          if (self->closed_) return;
          if (ec) {
            return self->fail(ec == asio::error::eof ? std::string("connection closed by the peer")
                                                     : "read failed: " + ec.message());
          }
          self->last_rx_ = Clock::now();
          self->decoder_.feed(std::string_view(self->buf_.data(), n));
          try {
            while (!self->closed_) {
              auto frame = self->decoder_.next();
              if (!frame) break;
              self->handle(*frame);
            }
          } catch (const ProtocolError& e) {
            return self->fail(std::string("protocol error: ") + e.what());
          } catch (const std::exception& e) {
            return self->fail(std::string("error: ") + e.what());
          }
          if (!self->closed_) self->read();
        });
  }

  void handle(const Frame& f) {
    if (!authenticated_) {
      if (f.type != MsgType::kHello) {
        throw ProtocolError(type_name(static_cast<std::uint8_t>(f.type)) +
                            " before authentication");
      }
      Hello h = decode_hello(f.payload);
      if (h.node >= server_.node_count_) {
        throw ProtocolError("hello from node " + std::to_string(h.node) + " of " +
                            std::to_string(server_.node_count_));
      }
      const Mac expected =
          make_mac(server_.secret_, Role::kDaemon, server_.job_id_, h.node, nonce_, h.nonce);
      if (!mac_equal(expected, h.mac))
        throw ProtocolError("authentication failed (wrong job secret)");
      node_ = h.node;
      if (!server_.session_authenticated(shared_from_this(), h.node)) {
        throw ProtocolError("node " + std::to_string(h.node) + " is already connected");
      }
      authenticated_ = true;
      timer_.cancel();
      decoder_.set_max_payload(kMaxPayload);
      write(MsgType::kWelcome, encode(Welcome{make_mac(server_.secret_, Role::kLauncher,
                                                       server_.job_id_, h.node, h.nonce, nonce_)}));
      if (server_.cb_.authenticated) server_.cb_.authenticated(node_);
      return;
    }
    if (f.type == MsgType::kHeartbeat) {
      if (!f.payload.empty()) throw ProtocolError("heartbeat with a payload");
      return;
    }
    if (server_.cb_.message) server_.cb_.message(node_, f);
  }

  ControlServer& server_;
  tcp::socket socket_;
  asio::steady_timer timer_;
  std::string peer_;
  std::array<char, 65536> buf_{};
  FrameDecoder decoder_;
  std::deque<std::string> queue_;
  Nonce nonce_{};
  std::uint32_t node_ = 0;
  bool authenticated_ = false;
  bool closed_ = false;
  Clock::time_point last_rx_ = Clock::now();
};

ControlServer::ControlServer(asio::io_context& io, const tcp::endpoint& listen,
                             const Secret& secret, std::string job_id, std::uint32_t nodes,
                             Callbacks callbacks, Settings settings)
    : io_(io),
      acceptor_(io),
      heartbeat_timer_(io),
      secret_(secret),
      job_id_(std::move(job_id)),
      node_count_(nodes),
      cb_(std::move(callbacks)),
      settings_(settings) {
  acceptor_.open(listen.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(listen);
  acceptor_.listen();
  accept();
  heartbeat_timer_.expires_after(settings_.heartbeat);
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) on_heartbeat_timer();
  });
}

ControlServer::~ControlServer() {
  stop();
}

void ControlServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  heartbeat_timer_.cancel();
  for (auto& [p, s] : pending_) s->close();
  for (auto& [n, s] : nodes_) s->close();
  pending_.clear();
  nodes_.clear();
}

void ControlServer::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (stopped_) return;
    if (!ec) {
      if (pending_.size() >= settings_.max_pending) {
        ++rejected_;
        if (cb_.log) cb_.log("control: refused a connection: too many unauthenticated connections");
        boost::system::error_code ignore;
        socket.close(ignore);
      } else {
        auto s = std::make_shared<ServerSession>(*this, std::move(socket));
        pending_[s.get()] = s;
        s->start();
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    }
    accept();
  });
}

void ControlServer::on_heartbeat_timer() {
  if (stopped_) return;
  const auto now = Clock::now();
  std::vector<std::shared_ptr<ServerSession>> silent;
  for (auto& [n, s] : nodes_) {
    if (now - s->last_rx() > settings_.link_timeout) {
      silent.push_back(s);
    } else {
      s->write(MsgType::kHeartbeat, {});
    }
  }
  for (auto& s : silent) {
    s->fail("no message for " + std::to_string(settings_.link_timeout.count()) +
            " ms (control link lost)");
  }
  heartbeat_timer_.expires_after(settings_.heartbeat);
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) on_heartbeat_timer();
  });
}

void ControlServer::session_rejected(ServerSession* s, const std::string& reason) {
  ++rejected_;
  if (cb_.log) cb_.log("control: rejected connection from " + s->peer() + ": " + reason);
  pending_.erase(s);
}

bool ControlServer::session_authenticated(const std::shared_ptr<ServerSession>& s,
                                          std::uint32_t node) {
  if (nodes_.count(node) != 0) return false;
  pending_.erase(s.get());
  nodes_[node] = s;
  return true;
}

void ControlServer::session_lost(ServerSession* s, const std::string& reason) {
  auto it = nodes_.find(s->node());
  if (it == nodes_.end() || it->second.get() != s) return;
  auto keep = it->second;
  nodes_.erase(it);
  if (cb_.lost) cb_.lost(s->node(), reason);
}

bool ControlServer::send(std::uint32_t node, MsgType type, const std::string& payload) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return false;
  it->second->write(type, payload);
  return true;
}

void ControlServer::close(std::uint32_t node) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  auto keep = it->second;
  nodes_.erase(it);
  keep->close();
}

}  // namespace spark::launch::control
