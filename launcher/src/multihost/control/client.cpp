#include "control/client.hpp"

#include <poll.h>

#include "control/messages.hpp"

namespace spark::launch::control {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

ControlClient::ControlClient(const std::string& host, std::uint16_t port,
                             std::chrono::milliseconds timeout)
    : socket_(io_) {
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (ec) throw LinkError("control address '" + host + "' is not an IP address");
  const tcp::endpoint ep(addr, port);
  bool done = false;
  boost::system::error_code result = asio::error::timed_out;
  socket_.async_connect(ep, [&](const boost::system::error_code& e) {
    done = true;
    result = e;
  });
  io_.run_for(timeout);
  if (!done) {
    socket_.close(ec);
    throw LinkError("cannot reach the launcher at " + host + ":" + std::to_string(port) +
                    " within " + std::to_string(timeout.count()) +
                    " ms (check --control-net and firewalls)");
  }
  if (result) {
    throw LinkError("cannot connect to the launcher at " + host + ":" + std::to_string(port) +
                    ": " + result.message());
  }
  socket_.set_option(tcp::no_delay(true), ec);
}

ControlClient::~ControlClient() {
  shutdown();
}

std::string ControlClient::local_address() const {
  boost::system::error_code ec;
  const auto ep = socket_.local_endpoint(ec);
  return ec ? std::string() : ep.address().to_string();
}

void ControlClient::shutdown() noexcept {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
}

void ControlClient::send(MsgType type, const std::string& payload) {
  const std::string frame = encode_frame(type, payload);
  std::lock_guard<std::mutex> lock(send_mutex_);
  boost::system::error_code ec;
  asio::write(socket_, asio::buffer(frame), ec);
  if (ec) throw LinkError("cannot send to the launcher: " + ec.message());
}

std::optional<Frame> ControlClient::receive(std::chrono::milliseconds timeout) {
  try {
    if (auto f = decoder_.next()) return f;
  } catch (const ProtocolError& e) {
    throw LinkError(std::string("bad message from the launcher: ") + e.what());
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    struct pollfd p {
      socket_.native_handle(), POLLIN, 0
    };
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw LinkError("poll on the control link failed");
    }
    if (rc == 0) return std::nullopt;
    char buf[65536];
    boost::system::error_code ec;
    const std::size_t n = socket_.read_some(asio::buffer(buf), ec);
    if (ec) {
      throw LinkError(ec == asio::error::eof ? std::string("the launcher closed the control link")
                                             : "control link broken: " + ec.message());
    }
    decoder_.feed(std::string_view(buf, n));
    try {
      if (auto f = decoder_.next()) return f;
    } catch (const ProtocolError& e) {
      throw LinkError(std::string("bad message from the launcher: ") + e.what());
    }
  }
}

void ControlClient::handshake(const Secret& secret, const std::string& job_id, std::uint32_t node,
                              std::chrono::milliseconds timeout) {
  auto expect = [&](MsgType type) {
    auto f = receive(timeout);
    if (!f)
      throw LinkError("the launcher did not answer within " + std::to_string(timeout.count()) +
                      " ms");
    if (f->type != type) {
      throw LinkError("expected " + type_name(static_cast<std::uint8_t>(type)) +
                      " from the launcher, got " + type_name(static_cast<std::uint8_t>(f->type)));
    }
    return std::move(f->payload);
  };
  try {
    const Challenge ch = decode_challenge(expect(MsgType::kChallenge));
    Hello hello;
    hello.node = node;
    hello.nonce = random_nonce();
    hello.mac = make_mac(secret, Role::kDaemon, job_id, node, ch.nonce, hello.nonce);
    send(MsgType::kHello, encode(hello));
    const Welcome w = decode_welcome(expect(MsgType::kWelcome));
    if (!mac_equal(w.mac, make_mac(secret, Role::kLauncher, job_id, node, hello.nonce, ch.nonce))) {
      throw LinkError("the launcher failed authentication (it does not know the job secret)");
    }
  } catch (const ProtocolError& e) {
    throw LinkError(std::string("bad handshake from the launcher: ") + e.what());
  }
  decoder_.set_max_payload(kMaxPayload);
}

}  // namespace spark::launch::control
