#include "transport/verbs/verbs_relay.hpp"
#include "log/log.hpp"
#include "record_fields.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace spark::transport {

namespace {

VerbsOptions relay_options(VerbsOptions base, const std::vector<RelayPair>& pairs) {
  base.peer_lanes.assign(2 * pairs.size(), {});
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    base.peer_lanes[2 * i] = pairs[i].x_lanes;
    base.peer_lanes[2 * i + 1] = pairs[i].y_lanes;
  }
  base.peer_via.clear();
  base.liveness = false;
  return base;
}

std::vector<int> virtual_peers(std::size_t pairs) {
  std::vector<int> v(2 * pairs);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
  return v;
}

}  // namespace

VerbsRelay::VerbsRelay(int rank, std::string host, std::vector<RelayPair> pairs, VerbsOptions base)
    : rank_(rank),
      host_(std::move(host)),
      pairs_(std::move(pairs)),
      timeout_ms_(base.timeout_ms),
      t_(std::make_unique<VerbsTransport>(-1, static_cast<int>(2 * pairs_.size()),
                                          virtual_peers(pairs_.size()),
                                          relay_options(std::move(base), pairs_))),
      per_pair_(pairs_.size(), 0) {}

VerbsRelay::~VerbsRelay() {
  stopping_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  if (report_)
    for (std::size_t i = 0; i < pairs_.size(); ++i)
      log::line("wireup", "relay on " + host_ + " (rank " + std::to_string(rank_) + ") forwarded " +
                              std::to_string(per_pair_[i]) + " messages for rank " +
                              std::to_string(pairs_[i].x) + " <-> rank " +
                              std::to_string(pairs_[i].y));
}

std::string VerbsRelay::endpoint(std::size_t i) const {
  // x reads the entries addressed to it (the links facing x), y those addressed to y.
  return t_->endpoint_as(
      {{static_cast<int>(2 * i), pairs_[i].x}, {static_cast<int>(2 * i + 1), pairs_[i].y}});
}

void VerbsRelay::connect(std::size_t i, const std::string& x_blob, const std::string& y_blob) {
  // x's blob lists its links toward y (addressed to y): they face our x side; and the reverse.
  (void)t_->connect_peer(static_cast<int>(2 * i), x_blob, pairs_[i].y);
  (void)t_->connect_peer(static_cast<int>(2 * i + 1), y_blob, pairs_[i].x);
}

std::vector<ProbeFailure> VerbsRelay::probe(std::chrono::milliseconds timeout) {
  return t_->probe(timeout);
}

void VerbsRelay::start(OnFailure on_failure, TimeoutSource timeout) {
  on_failure_ = std::move(on_failure);
  timeout_source_ = std::move(timeout);
  thread_ = std::thread([this] { run(); });
}

void VerbsRelay::report(int from, int to, const std::string& why, FailureCause cause,
                        std::uint32_t waited_ms) {
  if (failed_.exchange(true)) return;
  const RelayPair& p = pairs_[static_cast<std::size_t>(to / 2)];
  const int src = from % 2 == 0 ? p.x : p.y;
  const int dst = to % 2 == 0 ? p.x : p.y;
  FailureRecord rec;
  rec.rank = rank_;
  rec.peer = dst;
  RecvView v = t_->peek(from);
  if (v.header != nullptr) {
    rec.seq = v.header->seq;
    rec.step = v.header->step;
  }
  rec.waited_ms = waited_ms;
  rec.timeout_ms = timeout_ms_;
  rec.cause = cause;
  stamp_now(rec);
  set_texts(rec, t_->lane_name(to, WaitKind::credit), "relay",
            "roce relay on " + host_ + " for rank " + std::to_string(src) + " -> rank " +
                std::to_string(dst) + ": " + why);
  if (on_failure_) {
    try {
      on_failure_(rec);
    } catch (...) {  // the handler reports; a failure to report must not end the relay
    }
  }
}

bool VerbsRelay::forward(int from, int to, std::chrono::steady_clock::time_point now,
                         std::chrono::steady_clock::time_point& since) {
  bool moved = false;
  for (;;) {
    RecvView v = t_->peek(from);
    if (v.header == nullptr) {
      since = now;
      return moved;
    }
    if (!t_->can_send(to)) {
      std::string detail;
      if (t_->peer_state(to, &detail) != PeerState::ok) {
        report(from, to, detail, FailureCause::peer_error, 0);
      } else if (now - since > std::chrono::milliseconds(timeout_ms_)) {
        const auto waited = static_cast<std::uint32_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count());
        const RelayPair& p = pairs_[static_cast<std::size_t>(to / 2)];
        report(from, to,
               "stalled: rank " + std::to_string(to % 2 == 0 ? p.x : p.y) + " takes no data",
               FailureCause::timeout, waited);
      }
      return moved;
    }
    t_->send(to, *v.header, v.data);  // copies into staging: the slot can go back at once
    t_->release(from);
    ++per_pair_[static_cast<std::size_t>(from / 2)];
    since = now;
    moved = true;
  }
}

void VerbsRelay::run() noexcept {
  using clock = std::chrono::steady_clock;
  const int n = static_cast<int>(2 * pairs_.size());
  std::vector<clock::time_point> since(static_cast<std::size_t>(n), clock::now());
  clock::time_point last_move = clock::now();
  try {
    for (;;) {
      if (timeout_source_) timeout_ms_ = timeout_source_();
      const auto now = clock::now();
      bool moved = false;
      for (int v = 0; v < n; ++v) {
        // Virtual peer v's mailbox is forwarded to its partner (2i <-> 2i+1).
        moved = forward(v, v ^ 1, now, since[static_cast<std::size_t>(v)]) || moved;
        std::string detail;
        if (t_->peer_state(v, &detail) != PeerState::ok)
          report(v ^ 1, v, detail, FailureCause::peer_error, 0);
      }
      t_->progress();
      if (moved) last_move = now;
      if (stopping_.load(std::memory_order_relaxed)) {
        // Drain: the ends this relay serves may still be exchanging their last messages
        // after this rank has finished its own work.
        bool idle = true;
        for (int v = 0; v < n; ++v) idle = idle && t_->send_idle(v);
        const auto quiet = now - last_move;
        if ((idle &&
             quiet > std::chrono::milliseconds(std::min<std::uint32_t>(timeout_ms_, 2000))) ||
            quiet > std::chrono::milliseconds(timeout_ms_) || failed_.load())
          return;
      }
      if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  } catch (const std::exception& e) {
    report(0, 1, std::string("relay thread failed: ") + e.what(), FailureCause::peer_error, 0);
  }
}

}  // namespace spark::transport
