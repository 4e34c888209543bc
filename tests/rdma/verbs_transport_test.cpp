// The RoCE transport (libspark/src/transport/verbs/verbs_transport.hpp) driven through the
// Transport interface by N forked ranks inside the Soft-RoCE VM: every rank streams messages
// of varying sizes (0 .. slot_bytes) to every peer through few slots (so credits matter),
// receives and checks theirs, with a deadline on every wait like the communicator's wait
// point. With two devices the messages are striped across both lanes; the test checks that
// both carried data. Fault mode: --stop-rank R --at-seq S: rank R SIGSTOPs before message S;
// every other rank must report "no data from rank R on lane <rxe lane of message S> ... seq S".
//
//   spark_verbs_transport_test [--ranks N] [--devices rxe0,rxe1] [--msgs M] [--slots K]
//                              [--slot-bytes B] [--timeout-ms T] [--stop-rank R --at-seq S]
//                              [--rank-devices R=LIST] [--expect-connect-fail TEXT]
// --rank-devices gives rank R other lanes (e.g. a device whose netdev has another MTU);
// --expect-connect-fail: every rank must fail wire-up with TEXT (MTU mismatch test).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ctl_frame.hpp"
#include "fabric/rdma_lanes.hpp"
#include "transport/verbs/verbs_transport.hpp"
#include "verbs/verbs_error.hpp"

using namespace spark::transport;
using spark::test::recv_frame;
using spark::test::send_frame;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  int ranks = 2;
  std::string devices = "rxe0";
  int msgs = 300;
  std::size_t slots = 4;
  std::size_t slot_bytes = 65536;
  std::uint32_t timeout_ms = 3000;
  int stop_rank = -1;
  int at_seq = 10;
  std::map<int, std::string> rank_devices;  ///< --rank-devices R=LIST: rank R uses other lanes
  std::string expect_connect_fail;          ///< every rank must fail wire-up with this text
};

std::uint8_t byte_of(int from, int to, std::uint64_t seq, std::size_t k) {
  return static_cast<std::uint8_t>(from * 37 + to * 101 + seq * 13 + k * 7 + (k >> 8));
}
std::size_t size_of(std::uint64_t seq, std::size_t slot_bytes) {
  if (seq % 5 == 0) return slot_bytes;  // full slots too
  return (seq * 7919) % (slot_bytes + 1);
}

std::string run_rank(const Options& o, int me, int ctl) {
  std::vector<int> peers;
  for (int r = 0; r < o.ranks; ++r)
    if (r != me) peers.push_back(r);
  VerbsOptions vo;
  auto own = o.rank_devices.find(me);
  vo.devices = spark::fabric::parse_rdma_devices(
      own != o.rank_devices.end() ? own->second : o.devices, "--devices");
  vo.slots = o.slots;
  vo.slot_bytes = o.slot_bytes;
  vo.timeout_ms = o.timeout_ms;
  auto owner = std::make_unique<VerbsTransport>(me, o.ranks, peers, vo);
  // On a failure the transport (and its liveness connections) must outlive the report, or
  // the other ranks would see this one "gone" instead of their own failure: keep it alive
  // then; the parent kills every rank at the end.
  struct Keep {
    std::unique_ptr<VerbsTransport>& owner;
    bool ok = false;
    ~Keep() {
      if (!ok) (void)owner.release();
    }
  } keep{owner};
  VerbsTransport& t = *owner;
  if (me == 0) std::printf("%s", t.describe().c_str());
  std::fflush(stdout);
  send_frame(ctl, t.endpoint());
  std::vector<std::string> eps(static_cast<std::size_t>(o.ranks));
  for (int r = 0; r < o.ranks; ++r)
    if (!recv_frame(ctl, &eps[static_cast<std::size_t>(r)])) return "lost the parent";
  t.connect_all(eps);
  send_frame(ctl, "ready");
  std::string go;
  if (!recv_frame(ctl, &go)) return "lost the parent";

  std::vector<std::uint64_t> sent(static_cast<std::size_t>(o.ranks), 0),
      got(static_cast<std::size_t>(o.ranks), 0);
  std::vector<std::byte> buf(o.slot_bytes);
  std::set<std::string> lanes_used;
  const auto total = static_cast<std::uint64_t>(o.msgs);
  auto last_progress = Clock::now();
  bool stopped = false;
  while (true) {
    bool done = true, moved = false;
    for (int p : peers) {
      auto ps = static_cast<std::size_t>(p);
      std::string detail;
      if (t.peer_state(p, &detail) != PeerState::ok)
        return "rank " + std::to_string(me) + ": peer error from rank " + std::to_string(p) + ": " +
               detail;
      if (sent[ps] < total) {
        done = false;
        const std::uint64_t seq = sent[ps] + 1;
        // The rank to be stopped sends messages 1..S-1 to everyone, then stops (below).
        const bool held = me == o.stop_rank && static_cast<int>(seq) >= o.at_seq;
        if (!held && t.can_send(p)) {
          MsgHeader h;
          h.seq = seq;
          h.bytes = static_cast<std::uint32_t>(size_of(seq, o.slot_bytes));
          for (std::size_t k = 0; k < h.bytes; ++k) buf[k] = std::byte{byte_of(me, p, seq, k)};
          t.send(p, h, buf.data());
          ++sent[ps];
          moved = true;
        }
      }
      if (got[ps] < total) {
        done = false;
        std::string lane = t.lane_name(p, WaitKind::data);
        RecvView v = t.peek(p);
        if (v.header != nullptr) {
          const std::uint64_t seq = got[ps] + 1;
          if (v.header->seq != seq || v.header->bytes != size_of(seq, o.slot_bytes))
            return "rank " + std::to_string(me) + ": wrong header from rank " + std::to_string(p) +
                   " on lane " + lane + ": seq " + std::to_string(v.header->seq) + " (want " +
                   std::to_string(seq) + ")";
          for (std::size_t k = 0; k < v.header->bytes; ++k)
            if (v.data[k] != std::byte{byte_of(p, me, seq, k)})
              return "rank " + std::to_string(me) + ": data mismatch from rank " +
                     std::to_string(p) + " on lane " + lane + " seq " + std::to_string(seq) +
                     " byte " + std::to_string(k);
          t.release(p);
          lanes_used.insert(lane);
          ++got[ps];
          moved = true;
        }
      }
    }
    t.progress();
    if (me == o.stop_rank && !stopped) {
      bool all = true;
      for (int p : peers)
        all = all &&
              sent[static_cast<std::size_t>(p)] + 1 >= static_cast<std::uint64_t>(o.at_seq) &&
              t.send_idle(p);
      if (all) {
        stopped = true;
        ::raise(SIGSTOP);
      }
    }
    bool idle = true;
    for (int p : peers) idle = idle && t.send_idle(p);
    if (done && idle) break;
    if (moved) {
      last_progress = Clock::now();
      continue;
    }
    // The wait point's job in libspark: a deadline on every wait, naming peer, lane and seq.
    auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_progress);
    if (waited.count() >= o.timeout_ms) {
      for (int p : peers) {
        auto ps = static_cast<std::size_t>(p);
        if (got[ps] < total)
          return "rank " + std::to_string(me) + ": transport seq " + std::to_string(got[ps] + 1) +
                 " step 0: no data from rank " + std::to_string(p) + " on lane " +
                 t.lane_name(p, WaitKind::data) + " after " + std::to_string(waited.count()) +
                 " ms (timeout " + std::to_string(o.timeout_ms) + " ms)";
      }
      return "rank " + std::to_string(me) + ": sends not completing after " +
             std::to_string(waited.count()) + " ms";
    }
    t.block(peers[0], WaitKind::data, std::chrono::microseconds(100));
  }
  std::size_t want_lanes = vo.devices.size();
  if (lanes_used.size() != want_lanes)
    return "rank " + std::to_string(me) + ": only " + std::to_string(lanes_used.size()) + " of " +
           std::to_string(want_lanes) + " lanes carried data";
  send_frame(ctl, "barrier");  // peers may still need our credits: leave together
  if (!recv_frame(ctl, &go)) return "lost the parent";
  keep.ok = true;  // destroyed normally (QPs, MRs, CQs, PDs, contexts in reverse order)
  return "";
}

int parse_int(const char* s) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < 0 || v > 1000000000) {
    std::fprintf(stderr, "bad number '%s'\n", s);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--ranks")
      o.ranks = parse_int(v);
    else if (a == "--devices")
      o.devices = v;
    else if (a == "--msgs")
      o.msgs = parse_int(v);
    else if (a == "--slots")
      o.slots = static_cast<std::size_t>(parse_int(v));
    else if (a == "--slot-bytes")
      o.slot_bytes = static_cast<std::size_t>(parse_int(v));
    else if (a == "--timeout-ms")
      o.timeout_ms = static_cast<std::uint32_t>(parse_int(v));
    else if (a == "--stop-rank")
      o.stop_rank = parse_int(v);
    else if (a == "--at-seq")
      o.at_seq = parse_int(v);
    else if (a == "--expect-connect-fail")
      o.expect_connect_fail = v;
    else if (a == "--rank-devices") {
      std::string sv = v;
      auto eq = sv.find('=');
      if (eq == std::string::npos) {
        std::fprintf(stderr, "--rank-devices wants R=LIST\n");
        return 2;
      }
      o.rank_devices[parse_int(sv.substr(0, eq).c_str())] = sv.substr(eq + 1);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.ranks < 2 || o.ranks > 16) return 2;
  ::signal(SIGPIPE, SIG_IGN);
  const auto t0 = Clock::now();
  std::vector<int> ctl(static_cast<std::size_t>(o.ranks));
  std::vector<pid_t> pids(static_cast<std::size_t>(o.ranks));
  for (int r = 0; r < o.ranks; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 1;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(sv[0]);
      std::string err;
      try {
        err = run_rank(o, r, sv[1]);
      } catch (const std::exception& e) {
        err = "rank " + std::to_string(r) + ": " + e.what();
      }
      try {
        send_frame(sv[1], err.empty() ? "ok" : "FAIL " + err);
      } catch (...) {
      }
      std::string wait_for_end;
      recv_frame(sv[1], &wait_for_end);  // stay (and stay connected) until the parent ends us
      ::_exit(err.empty() ? 0 : 1);
    }
    ::close(sv[1]);
    ctl[static_cast<std::size_t>(r)] = sv[0];
    pids[static_cast<std::size_t>(r)] = pid;
  }
  auto finish = [&](bool ok, const char* what) {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("transport: %d ranks, lanes %s, %d msgs/peer, %zu slots x %zu B%s: %s%s (%.2f s)\n",
                o.ranks, o.devices.c_str(), o.msgs, o.slots, o.slot_bytes,
                o.stop_rank >= 0 ? ", stopped rank" : "", ok ? "PASS" : "FAIL", what, secs);
    return ok ? 0 : 1;
  };
  std::vector<std::string> eps(static_cast<std::size_t>(o.ranks));
  std::string msg;
  for (int r = 0; r < o.ranks; ++r) {
    if (!recv_frame(ctl[static_cast<std::size_t>(r)], &eps[static_cast<std::size_t>(r)]) ||
        eps[static_cast<std::size_t>(r)].rfind("FAIL ", 0) == 0) {
      std::printf("transport: rank %d: %s\n", r, eps[static_cast<std::size_t>(r)].c_str());
      return finish(false, " (wire-up)");
    }
  }
  for (int r = 0; r < o.ranks; ++r)
    for (const auto& e : eps) send_frame(ctl[static_cast<std::size_t>(r)], e);
  if (!o.expect_connect_fail.empty()) {
    // Every rank must refuse the connection with the expected text (e.g. an MTU mismatch).
    bool all = true;
    for (int r = 0; r < o.ranks; ++r) {
      bool got = recv_frame(ctl[static_cast<std::size_t>(r)], &msg);
      std::printf("transport: rank %d: %s\n", r, got ? msg.c_str() : "(nothing)");
      all = all && got && msg.rfind("FAIL ", 0) == 0 &&
            msg.find(o.expect_connect_fail) != std::string::npos;
    }
    return finish(all, " (expected connect failure)");
  }
  for (int r = 0; r < o.ranks; ++r) {
    if (!recv_frame(ctl[static_cast<std::size_t>(r)], &msg) || msg != "ready") {
      std::printf("transport: rank %d: %s\n", r, msg.c_str());
      return finish(false, " (connect)");
    }
  }
  for (int r = 0; r < o.ranks; ++r) send_frame(ctl[static_cast<std::size_t>(r)], "go");
  // Healthy ranks say "barrier" (then get released) or "FAIL ..."; the stopped one says nothing.
  bool ok = true;
  int named = 0, reporters = 0;
  std::vector<bool> at_barrier(static_cast<std::size_t>(o.ranks), false);
  for (int r = 0; r < o.ranks; ++r) {
    if (r == o.stop_rank) continue;
    pollfd pfd{ctl[static_cast<std::size_t>(r)], POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(o.timeout_ms) * 4 + 60000) <= 0 ||
        !recv_frame(ctl[static_cast<std::size_t>(r)], &msg)) {
      std::printf("transport: rank %d gave no result\n", r);
      ok = false;
      continue;
    }
    at_barrier[static_cast<std::size_t>(r)] = msg == "barrier";
    if (!at_barrier[static_cast<std::size_t>(r)])
      std::printf("transport: rank %d: %s\n", r, msg.c_str());
    if (o.stop_rank >= 0) {
      ++reporters;
      // Message S from the stopped rank travels on lane (S-1) % lanes.
      auto lanes = spark::fabric::parse_rdma_devices(o.devices, "--devices");
      const std::string lane = lanes[static_cast<std::size_t>(o.at_seq - 1) % lanes.size()];
      if (msg.find("no data from rank " + std::to_string(o.stop_rank) + " on lane " + lane) !=
              std::string::npos &&
          msg.find("seq " + std::to_string(o.at_seq) + " ") != std::string::npos)
        ++named;
    } else {
      ok = ok && at_barrier[static_cast<std::size_t>(r)];
    }
  }
  if (o.stop_rank < 0 && ok) {
    for (int r = 0; r < o.ranks; ++r) send_frame(ctl[static_cast<std::size_t>(r)], "go");
    for (int r = 0; r < o.ranks; ++r) {
      ok = ok && recv_frame(ctl[static_cast<std::size_t>(r)], &msg) && msg == "ok";
      if (msg != "ok") std::printf("transport: rank %d: %s\n", r, msg.c_str());
    }
  }
  if (o.stop_rank >= 0) ok = ok && named == reporters;
  return finish(ok, "");
}
