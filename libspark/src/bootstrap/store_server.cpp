#include "bootstrap/store_server.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <vector>

#include "bootstrap/wire.hpp"
#include "spark/error.hpp"

namespace spark::bootstrap {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    if (i == 8 && ranks.size() > 10) {
      out += fmt::format("... ({} in all)", ranks.size());
      break;
    }
    out += std::to_string(ranks[i]);
  }
  return out;
}

}  // namespace

// Everything below runs on the server thread only, except the done_* members (mutex).
struct StoreServer::State : std::enable_shared_from_this<StoreServer::State> {
  struct Session : std::enable_shared_from_this<Session> {
    Session(State& s, tcp::socket sock)
        : state(s), socket(std::move(sock)), timer(socket.get_executor()) {}
    State& state;
    tcp::socket socket;
    asio::steady_timer timer;  // fence deadline
    int rank = -1;
    std::uint64_t waiting_epoch = 0;  // 0 = not in a fence
    std::byte prefix[4] = {};
    std::vector<std::byte> body;
    std::deque<std::vector<std::byte>> out;
    bool closed = false;

    void start_read() {
      auto self = shared_from_this();
      asio::async_read(socket, asio::buffer(prefix), [self](auto ec, std::size_t) {
        if (ec) return self->state.on_closed(*self);
        const auto n = wire::frame_length(self->prefix);
        if (n == 0 || n > wire::kMaxFrame) return self->state.on_closed(*self);
        self->body.resize(n);
        asio::async_read(self->socket, asio::buffer(self->body), [self](auto ec2, std::size_t) {
          if (ec2) return self->state.on_closed(*self);
          try {
            self->state.on_message(*self);
          } catch (const wire::ProtocolError&) {
            return self->state.on_closed(*self);
          }
          if (!self->closed) self->start_read();
        });
      });
    }
    void send(std::vector<std::byte> frame) {
      if (closed) return;
      out.push_back(std::move(frame));
      if (out.size() == 1) write_next();
    }
    void write_next() {
      auto self = shared_from_this();
      asio::async_write(socket, asio::buffer(out.front()), [self](auto ec, std::size_t) {
        if (ec) return self->state.on_closed(*self);
        self->out.pop_front();
        if (!self->out.empty()) self->write_next();
      });
    }
  };

  State(int n, std::string job) : size(n), job_id(std::move(job)), acceptor(io) {}

  asio::io_context io;
  int size;
  std::string job_id;
  tcp::acceptor acceptor;
  std::map<int, std::shared_ptr<Session>> by_rank;  // ranks currently connected
  std::vector<std::weak_ptr<Session>> sessions;     // every connection, for the shutdown
  std::set<int> joined;                             // ranks that ever said HELLO
  std::set<int> left;                               // ranks that said BYE or disconnected
  std::map<std::uint64_t, std::set<int>> arrived;   // fence epoch -> ranks
  std::map<std::pair<int, std::string>, std::vector<std::byte>> entries;
  std::string abort_message;
  std::uint64_t departed_epoch = 0;  // the last fence a departed rank made fail (0: none)

  // Rank 0 may stop serving once it has left itself and nobody still needs an answer: every
  // other rank has left, or is idle (not in a fence, nothing left to send to it). An idle rank
  // cannot complete any later fence without rank 0 anyway; it gets a clear error instead,
  // except where a departed rank made a fence fail that it has not reached yet: then it gets
  // that fence's answer, naming the rank that left, not "rank 0 exited" (rank 0 failed the
  // same fence and returned first; seen under asan).
  bool may_stop() const {
    if (static_cast<int>(left.size()) == size) return true;
    if (left.count(0) == 0) return false;
    const auto failed = arrived.find(departed_epoch);
    for (const auto& [r, s] : by_rank) {
      if (s->waiting_epoch != 0 || !s->out.empty()) return false;
      if (failed != arrived.end() && failed->second.count(r) == 0) return false;
    }
    return true;
  }

  void accept() {
    acceptor.async_accept([self = shared_from_this()](auto ec, tcp::socket sock) {
      if (ec) return;  // acceptor closed
      sock.set_option(tcp::no_delay(true));
      auto session = std::make_shared<Session>(*self, std::move(sock));
      std::erase_if(self->sessions, [](const auto& w) { return w.expired(); });
      self->sessions.push_back(session);
      session->start_read();
      self->accept();
    });
  }

  void on_message(Session& s) {
    wire::Reader in(s.body);
    const auto type = in.type();
    if (s.rank < 0 && type != wire::Type::hello) throw wire::ProtocolError("expected HELLO");
    switch (type) {
      case wire::Type::hello:
        return on_hello(s, in);
      case wire::Type::put: {
        auto key = in.str();
        entries[{s.rank, std::move(key)}] = in.bytes();
        return;
      }
      case wire::Type::fence: {
        const auto epoch = in.u64();
        const auto timeout_ms = in.u32();
        return on_fence(s, epoch, timeout_ms);
      }
      case wire::Type::abort: {
        const auto status = in.u32();
        abort_message =
            fmt::format("rank {} aborted the job (status {}): {}", s.rank, status, in.str());
        fail_all_waiters(abort_message);
        return;
      }
      case wire::Type::bye:
        mark_left(s.rank);
        return;
      default:
        throw wire::ProtocolError("unexpected message from a client");
    }
  }

  void refuse(Session& s, const std::string& message) {
    s.send(wire::Writer(wire::Type::error).str(message).finish());
    s.closed = true;  // stop reading; the write completes, then the session is dropped
  }

  void on_hello(Session& s, wire::Reader& in) {
    const auto rank = static_cast<int>(in.u32());
    const auto n = static_cast<int>(in.u32());
    const auto job = in.str();
    if (n != size) {
      return refuse(s, fmt::format("rank {} was started with a job size of {} but rank 0 serves "
                                   "a job of size {}: give every rank the same SPARK_SIZE "
                                   "(or WORLD_SIZE)",
                                   rank, n, size));
    }
    if (rank < 0 || rank >= size) {
      return refuse(s, fmt::format("rank {} is out of range for a job of size {}", rank, size));
    }
    if (job != job_id) {
      return refuse(s, fmt::format("rank {} belongs to job \"{}\" but this rendezvous serves job "
                                   "\"{}\" (two jobs on one SPARK_RENDEZVOUS port?)",
                                   rank, job, job_id));
    }
    if (joined.count(rank) != 0) {
      return refuse(s, fmt::format("rank {} joined the rendezvous twice: two processes were "
                                   "started with the same rank",
                                   rank));
    }
    s.rank = rank;
    joined.insert(rank);
    by_rank[rank] = s.shared_from_this();
    s.send(wire::Writer(wire::Type::welcome).finish());
  }

  std::vector<int> missing(std::uint64_t epoch) const {
    std::vector<int> out;
    const auto& in = arrived.at(epoch);
    for (int r = 0; r < size; ++r) {
      if (in.count(r) == 0) out.push_back(r);
    }
    return out;
  }

  std::string missing_text(std::uint64_t epoch, std::string_view why) const {
    const auto miss = missing(epoch);
    std::vector<int> never;
    std::vector<int> gone;
    for (int r : miss) {
      if (joined.count(r) == 0)
        never.push_back(r);
      else if (left.count(r) != 0)
        gone.push_back(r);
    }
    std::string text = fmt::format("rank{} {} did not reach fence {} {}",
                                   miss.size() == 1 ? "" : "s", rank_list(miss), epoch, why);
    if (!never.empty()) text += fmt::format("; never connected: {}", rank_list(never));
    if (!gone.empty()) text += fmt::format("; disconnected: {}", rank_list(gone));
    return text;
  }

  // Only the ranks that left are named: the others may merely be slower.
  std::string departed_text(std::uint64_t epoch) const {
    std::vector<int> gone;
    const auto& in = arrived.at(epoch);
    for (int r : left) {
      if (in.count(r) == 0) gone.push_back(r);
    }
    return fmt::format(
        "fence {} cannot complete: rank{} {} left the rendezvous before reaching "
        "it (exited or crashed)",
        epoch, gone.size() == 1 ? "" : "s", rank_list(gone));
  }

  void on_fence(Session& s, std::uint64_t epoch, std::uint32_t timeout_ms) {
    auto& in = arrived[epoch];
    in.insert(s.rank);
    s.waiting_epoch = epoch;
    if (!abort_message.empty()) return fail(s, abort_message);
    // A rank that already left can never arrive: fail now instead of at the deadline.
    for (int r : left) {
      if (in.count(r) == 0) {
        departed_epoch = std::max(departed_epoch, epoch);
        return fail(s, departed_text(epoch));
      }
    }
    if (static_cast<int>(in.size()) == size) return complete(epoch);
    s.timer.expires_after(std::chrono::milliseconds(timeout_ms));
    s.timer.async_wait([self = s.shared_from_this(), epoch, timeout_ms](auto ec) {
      if (ec || self->waiting_epoch != epoch) return;
      // One rank's deadline failing the fence fails it for every waiter, with one message,
      // so that all ranks report the same missing ranks at the same time.
      self->state.fail_epoch(
          epoch, self->state.missing_text(epoch, fmt::format("within {} ms", timeout_ms)));
    });
  }

  void fail_epoch(std::uint64_t epoch, const std::string& message) {
    for (auto& [r, s] : by_rank) {
      if (s->waiting_epoch == epoch) fail(*s, message);
    }
  }

  void complete(std::uint64_t epoch) {
    wire::Writer w(wire::Type::fence_ok);
    w.u32(static_cast<std::uint32_t>(entries.size()));
    for (const auto& [k, v] : entries) {
      w.u32(static_cast<std::uint32_t>(k.first)).str(k.second).bytes(v);
    }
    const auto frame = w.finish();
    for (auto& [r, s] : by_rank) {
      if (s->waiting_epoch != epoch) continue;
      s->waiting_epoch = 0;
      s->timer.cancel();
      s->send(frame);
    }
  }

  void fail(Session& s, const std::string& message) {
    s.waiting_epoch = 0;
    s.timer.cancel();
    s.send(wire::Writer(wire::Type::fence_fail).str(message).finish());
  }

  void fail_all_waiters(const std::string& message) {
    for (auto& [r, s] : by_rank) {
      if (s->waiting_epoch != 0) fail(*s, message);
    }
  }

  void mark_left(int rank) {
    if (rank < 0 || !left.insert(rank).second) return;
    // Waiters in a fence that this rank never reached can no longer complete.
    for (auto& [r, s] : by_rank) {
      if (s->waiting_epoch != 0 && arrived[s->waiting_epoch].count(rank) == 0) {
        departed_epoch = std::max(departed_epoch, s->waiting_epoch);
        fail(*s, departed_text(s->waiting_epoch));
      }
    }
  }

  void on_closed(Session& s) {
    if (s.closed && s.rank < 0) return;
    s.closed = true;
    s.timer.cancel();
    boost::system::error_code ignored;
    s.socket.close(ignored);
    if (s.rank >= 0) {
      auto it = by_rank.find(s.rank);
      if (it != by_rank.end() && it->second.get() == &s) {
        auto keep = it->second;  // s must outlive the erase
        by_rank.erase(it);
        mark_left(s.rank);
      }
    }
  }
};

StoreServer::StoreServer(std::uint16_t port, int size, std::string job_id)
    : state_(std::make_shared<State>(size, std::move(job_id))) {
  boost::system::error_code ec;
  const tcp::endpoint endpoint(tcp::v4(), port);
  state_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) state_->acceptor.bind(endpoint, ec);
  if (!ec) state_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw BootstrapError(fmt::format(
        "env rendezvous: rank 0 cannot listen on port {}: {}. Another program (another job, or "
        "torch's TCPStore on MASTER_PORT) may hold it: choose a free port with "
        "SPARK_RENDEZVOUS=HOST:PORT",
        port, ec.message()));
  }
  port_ = state_->acceptor.local_endpoint().port();
  state_->accept();
  thread_ = std::thread([state = state_] { state->io.run(); });
}

StoreServer::~StoreServer() {
  // Every pending operation holds the State (shared_from_this) inside the State's own
  // io_context: close every socket, connected ranks or not, then run the aborted handlers to
  // the end, so that the State, its listening socket and every connection are freed (found by
  // tests/fuzz/store_frames: the State leaked with the listening fd at every shutdown).
  asio::post(state_->io, [state = state_] {
    boost::system::error_code ignored;
    state->acceptor.close(ignored);
    for (const auto& w : state->sessions) {
      if (auto s = w.lock()) {
        s->closed = true;
        s->timer.cancel();
        s->socket.close(ignored);
      }
    }
    state->io.stop();
  });
  if (thread_.joinable()) thread_.join();
  state_->io.restart();
  state_->io.run();
}

bool StoreServer::drain(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto done = std::make_shared<std::promise<bool>>();
    auto result = done->get_future();
    asio::post(state_->io, [state = state_, done] { done->set_value(state->may_stop()); });
    if (result.wait_until(deadline) != std::future_status::ready) return false;
    if (result.get()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace spark::bootstrap
