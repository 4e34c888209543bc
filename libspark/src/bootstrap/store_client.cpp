#include "bootstrap/store_client.hpp"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <thread>

#include "bootstrap/wire.hpp"
#include "spark/error.hpp"

namespace spark::bootstrap {

namespace asio = boost::asio;
using asio::ip::tcp;

StoreClient::StoreClient(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                         std::chrono::milliseconds timeout_for_message)
    : socket_(io_), address_(fmt::format("{}:{}", host, port)) {
  tcp::resolver resolver(io_);
  std::string last_error = "no attempt made";
  auto backoff = std::chrono::milliseconds(5);  // rank 0 is usually up within a few ms
  // Rank 0 may start later than the others: refused connections are retried until the deadline.
  while (true) {
    boost::system::error_code ec;
    const auto endpoints = resolver.resolve(host, std::to_string(port), ec);
    if (!ec) {
      bool done = false;
      asio::async_connect(socket_, endpoints, [&](auto e, const auto&) {
        ec = e;
        done = true;
      });
      const auto attempt_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(2));
      if (!run_until(done, attempt_deadline)) ec = asio::error::timed_out;
      if (!ec) {
        socket_.set_option(tcp::no_delay(true), ec);
        return;
      }
    }
    last_error = ec.message();
    boost::system::error_code ignored;
    socket_.close(ignored);
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  throw BootstrapError(fmt::format(
      "env rendezvous: could not connect to rank 0 at {} within {} ms (SPARK_JOIN_TIMEOUT_MS); "
      "last error: {}. Check that rank 0 is running, that SPARK_RENDEZVOUS (or "
      "MASTER_ADDR/MASTER_PORT) names rank 0's host and a port it can listen on, and that no "
      "firewall blocks it",
      address_, timeout_for_message.count(), last_error));
}

StoreClient::~StoreClient() {
  close();
}

void StoreClient::close() noexcept {
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

bool StoreClient::run_until(const bool& done, Clock::time_point deadline) {
  io_.restart();
  while (!done && Clock::now() < deadline) {
    io_.run_one_until(deadline);
  }
  if (done) return true;
  // Cancel the pending operation and let its handler run so that nothing refers to our stack.
  boost::system::error_code ignored;
  socket_.cancel(ignored);
  io_.restart();
  while (!done) io_.run_one();
  return false;
}

void StoreClient::send(const std::vector<std::byte>& frame, Clock::time_point deadline) {
  bool done = false;
  boost::system::error_code ec;
  asio::async_write(socket_, asio::buffer(frame), [&](auto e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(done, deadline)) ec = asio::error::timed_out;
  if (ec) {
    throw BootstrapError(fmt::format(
        "env rendezvous: lost the connection to rank 0 at {} ({}): rank 0 exited or crashed",
        address_, ec.message()));
  }
}

bool StoreClient::receive(std::vector<std::byte>& body, Clock::time_point deadline) {
  std::byte prefix[4] = {};
  bool done = false;
  boost::system::error_code ec;
  asio::async_read(socket_, asio::buffer(prefix), [&](auto e, std::size_t) {
    ec = e;
    done = true;
  });
  if (!run_until(done, deadline)) return false;
  if (!ec) {
    const auto n = wire::frame_length(prefix);
    if (n == 0 || n > wire::kMaxFrame) {
      throw BootstrapError(fmt::format(
          "env rendezvous: {} sent a malformed message: is it really rank 0 of this job?",
          address_));
    }
    body.resize(n);
    done = false;
    asio::async_read(socket_, asio::buffer(body), [&](auto e, std::size_t) {
      ec = e;
      done = true;
    });
    // The rest of a frame follows its prefix at once; the deadline still applies.
    if (!run_until(done, deadline)) return false;
  }
  if (ec) {
    throw BootstrapError(fmt::format(
        "env rendezvous: lost the connection to rank 0 at {} ({}): rank 0 exited or crashed",
        address_, ec == asio::error::eof ? std::string("closed") : ec.message()));
  }
  return true;
}

}  // namespace spark::bootstrap
