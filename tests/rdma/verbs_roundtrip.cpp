// Standalone verbs test (runs inside the Soft-RoCE VM, see vm_run.sh): N processes on one
// RDMA device connect RC queue pairs to each other (endpoints exchanged through the parent
// over socketpairs), then run lock-step rounds: every rank RDMA-WRITEs a payload and then a
// sequence flag into every peer's mailbox slot, waits for every peer's flag with a deadline
// and checks the data. Depends only on the verbs layer, not on libspark's collectives.
//
//   spark_verbs_roundtrip [--ranks N] [--device rxe0] [--iters M] [--bytes B]
//                         [--timeout-ms T] [--stop-rank R --at-seq S] [--kill-rank R --at-seq S]
//                         [--delay-ms D] [--expect TEXT] [--bad-rkey-rank R --at-seq S]
//
// Fault modes: --stop-rank R: rank R SIGSTOPs itself at round S; every other rank must fail
// with "no data from rank R on lane DEV ... seq S". --kill-rank R: rank R exits at round S;
// every other rank must fail (timeout or an error completion naming rank R and the lane);
// with --delay-ms the others post round S only after R is gone, so their writes end in an
// error completion (retry exceeded) before the deadline. --expect TEXT: the failure lines must
// also contain TEXT. --bad-rkey-rank R: rank R writes round S with a wrong rkey; its error
// completion ("remote access error") must become its failure line, naming peer and lane.
// Exit 0 when the expected outcome happened, 1 otherwise.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctl_frame.hpp"
#include "verbs/port.hpp"
#include "verbs/verbs_error.hpp"

using namespace spark::verbs;
using Clock = std::chrono::steady_clock;
using spark::test::recv_frame;
using spark::test::send_frame;

namespace {

struct Options {
  int ranks = 2;
  std::string device = "rxe0";
  int iters = 100;
  std::uint32_t bytes = 65536;
  std::uint32_t timeout_ms = 3000;
  int stop_rank = -1;
  int kill_rank = -1;
  int at_seq = 5;
  int bad_rkey_rank = -1;  ///< this rank writes with a wrong rkey at round at_seq
  int delay_ms = 0;        ///< healthy ranks pause this long before posting round at_seq
  std::string expect;      ///< text every healthy rank's failure line must contain
};

std::string to_str(const std::vector<std::byte>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}
std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::uint64_t pattern(int sender, int receiver, std::uint64_t seq, std::size_t k) {
  return (static_cast<std::uint64_t>(sender) << 56) ^ (static_cast<std::uint64_t>(receiver) << 48) ^
         (seq << 24) ^ (k * 0x9e3779b97f4a7c15ull >> 20);
}

// --- one rank ---------------------------------------------------------------------------------
class Rank {
 public:
  Rank(const Options& o, int me, int ctl) : o_(o), me_(me), ctl_(ctl) {}

  // Returns "" on success, else the failure line.
  std::string run() {
    const std::size_t slot = 64 + o_.bytes;          // flag word (padded) + payload
    const std::size_t per_peer = 2 * slot;           // two slots: lock-step rounds
    const std::size_t region = per_peer * o_.ranks;  // mailboxes, indexed by sender
    const std::size_t staging = slot * o_.ranks;     // what this rank writes out
    check_memlock(region + staging);

    port_ = open_port(o_.device, 1, kSysfsInfiniband, std::nullopt, 4 * o_.ranks + 16);
    const GidChoice& gid = port_.gid;
    mem_.assign(region + staging, std::byte{0});
    mr_ = register_memory(port_.pd, mem_.data(), mem_.size());
    timeouts_ = qp_timeouts(o_.timeout_ms);

    qps_.resize(o_.ranks);
    std::vector<Endpoint> local(o_.ranks);
    for (int p = 0; p < o_.ranks; ++p) {
      if (p == me_) continue;
      qps_[p] = create_rc_qp(port_.pd, port_.cq, 8);
      local[p] = local_endpoint(port_, qps_[p], mr_, mem_.data() + per_peer * p, per_peer);
      send_frame(ctl_, to_str(serialize(local[p])));
    }
    remote_.resize(o_.ranks);
    for (int p = 0; p < o_.ranks; ++p) {
      if (p == me_) continue;
      std::string f;
      if (!recv_frame(ctl_, &f)) return "lost the parent during wire-up";
      remote_[p] = deserialize(as_bytes(f));
      connect_rc_qp(qps_[p], local[p], remote_[p], p, timeouts_);
    }
    if (me_ == 0) {
      std::printf(
          "rank 0: %s, GID index %d (%s), path MTU %u, QP timeout 2^%d x 4.096 us x %d tries = "
          "%.0f ms\n",
          o_.device.c_str(), gid.index, gid_text(gid.gid).c_str(), local[1].mtu, timeouts_.timeout,
          timeouts_.retry_cnt + 1, timeouts_.give_up_ms);
      std::fflush(stdout);
    }
    send_frame(ctl_, "ready");
    std::string go;
    if (!recv_frame(ctl_, &go)) return "lost the parent before the first round";

    for (std::uint64_t seq = 1; seq <= static_cast<std::uint64_t>(o_.iters); ++seq) {
      if (static_cast<int>(seq) == o_.at_seq && me_ == o_.stop_rank) ::raise(SIGSTOP);
      if (static_cast<int>(seq) == o_.at_seq && me_ == o_.kill_rank) ::_exit(9);
      if (static_cast<int>(seq) == o_.at_seq && o_.delay_ms > 0) ::usleep(o_.delay_ms * 1000u);
      std::string err = round(seq, slot, per_peer, region);
      if (!err.empty()) return err;
    }
    return "";
  }

 private:
  std::string round(std::uint64_t seq, std::size_t slot, std::size_t per_peer, std::size_t region) {
    const std::size_t s = (seq % 2) * slot;  // slot offset inside a mailbox
    int outstanding = 0;
    for (int p = 0; p < o_.ranks; ++p) {
      if (p == me_) continue;
      std::byte* st = mem_.data() + region + slot * p;
      auto* words = reinterpret_cast<std::uint64_t*>(st + 64);
      for (std::size_t k = 0; k < o_.bytes / 8; ++k) words[k] = pattern(me_, p, seq, k);
      std::memcpy(st, &seq, sizeof seq);
      const Endpoint& r = remote_[p];
      std::uint64_t raddr = r.addr + s;
      // Payload first, then the flag: one RC QP delivers the two writes in order.
      // Fault injection: a wrong rkey makes the peer's NIC refuse the write.
      const std::uint32_t rkey = (me_ == o_.bad_rkey_rank && static_cast<int>(seq) == o_.at_seq)
                                     ? r.rkey ^ 0x5a5a00
                                     : r.rkey;
      int rc =
          post_write(qps_[p].get(), 2 * p, st + 64, o_.bytes, mr_->lkey, raddr + 64, rkey, false);
      if (rc == 0)
        rc = post_write(qps_[p].get(), 2 * p + 1, st, 8, mr_->lkey, raddr, r.rkey, true, true);
      if (rc != 0) return fail(seq, p, call_failed("ibv_post_send", o_.device, rc));
      ++outstanding;
    }
    auto start = Clock::now();
    auto deadline = start + std::chrono::milliseconds(o_.timeout_ms);
    // Wait for this round's flag from every peer; completions are polled meanwhile so that an
    // error completion becomes the report instead of a timeout.
    for (int p = 0; p < o_.ranks; ++p) {
      if (p == me_) continue;
      std::byte* mb = mem_.data() + per_peer * p + s;
      auto* flag = reinterpret_cast<std::uint64_t*>(mb);
      while (std::atomic_ref<std::uint64_t>(*flag).load(std::memory_order_acquire) != seq) {
        std::string err = poll_cq(seq, &outstanding);
        if (!err.empty()) return err;
        if (Clock::now() >= deadline) {
          auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
          return "rank " + std::to_string(me_) + ": roundtrip seq " + std::to_string(seq) +
                 ": no data from rank " + std::to_string(p) + " on lane " + o_.device + " after " +
                 std::to_string(waited.count()) + " ms (timeout " + std::to_string(o_.timeout_ms) +
                 " ms)";
        }
        ::sched_yield();
      }
      auto* words = reinterpret_cast<const std::uint64_t*>(mb + 64);
      for (std::size_t k = 0; k < o_.bytes / 8; ++k) {
        if (words[k] != pattern(p, me_, seq, k))
          return fail(seq, p, "data check failed at word " + std::to_string(k));
      }
    }
    while (outstanding > 0) {
      std::string err = poll_cq(seq, &outstanding);
      if (!err.empty()) return err;
      if (Clock::now() >= deadline)
        return fail(seq, -1, "write completions missing at the deadline");
      ::sched_yield();
    }
    return "";
  }

  std::string poll_cq(std::uint64_t seq, int* outstanding) {
    ibv_wc wc[8];
    int n = ibv_poll_cq(port_.cq.get(), 8, wc);
    if (n < 0) return fail(seq, -1, call_failed("ibv_poll_cq", o_.device, EIO));
    for (int i = 0; i < n; ++i) {
      int peer = static_cast<int>(wc[i].wr_id / 2);
      if (wc[i].status != IBV_WC_SUCCESS)
        return fail(seq, peer, "RDMA write failed: " + completion_error(wc[i]));
      --*outstanding;
    }
    return "";
  }

  std::string fail(std::uint64_t seq, int peer, const std::string& what) {
    return "rank " + std::to_string(me_) + ": roundtrip seq " + std::to_string(seq) + ": rank " +
           std::to_string(peer) + " on lane " + o_.device + ": " + what;
  }

  const Options& o_;
  int me_;
  int ctl_;
  // Declared in creation order: destroyed in reverse (QPs, MR, CQ, PD, context).
  OpenPort port_;
  std::vector<std::byte> mem_;
  MemoryRegion mr_;
  std::vector<QueuePair> qps_;
  std::vector<Endpoint> remote_;
  QpTimeouts timeouts_;
};

int parse_int(const char* s, const char* what) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < 0 || v > 1000000000) {
    std::fprintf(stderr, "bad value for %s: '%s'\n", what, s);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc + 1; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ranks")
      o.ranks = parse_int(val(), "--ranks");
    else if (a == "--device")
      o.device = val();
    else if (a == "--iters")
      o.iters = parse_int(val(), "--iters");
    else if (a == "--bytes")
      o.bytes = static_cast<std::uint32_t>(parse_int(val(), "--bytes")) / 8 * 8;
    else if (a == "--timeout-ms")
      o.timeout_ms = static_cast<std::uint32_t>(parse_int(val(), "--timeout-ms"));
    else if (a == "--stop-rank")
      o.stop_rank = parse_int(val(), "--stop-rank");
    else if (a == "--kill-rank")
      o.kill_rank = parse_int(val(), "--kill-rank");
    else if (a == "--at-seq")
      o.at_seq = parse_int(val(), "--at-seq");
    else if (a == "--bad-rkey-rank")
      o.bad_rkey_rank = parse_int(val(), "--bad-rkey-rank");
    else if (a == "--delay-ms")
      o.delay_ms = parse_int(val(), "--delay-ms");
    else if (a == "--expect")
      o.expect = val();
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (o.ranks < 2 || o.ranks > 16) {
    std::fprintf(stderr, "--ranks must be 2..16\n");
    return 2;
  }
  const int faulty = o.stop_rank >= 0 ? o.stop_rank : o.kill_rank;
  const int reporter = o.bad_rkey_rank;  // reports the error completion itself
  const auto t0 = Clock::now();
  ::signal(SIGPIPE, SIG_IGN);  // a rank that died closes its socket: an error, not a signal

  std::vector<int> ctl(o.ranks);
  std::vector<pid_t> pids(o.ranks);
  for (int r = 0; r < o.ranks; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      perror("socketpair");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::close(sv[0]);
      for (int q = 0; q < r; ++q) ::close(ctl[q]);
      std::string err;
      try {
        Rank rank(o, r, sv[1]);
        err = rank.run();
      } catch (const std::exception& e) {
        err = "rank " + std::to_string(r) + ": " + e.what();
      }
      try {
        send_frame(sv[1], err.empty() ? "ok" : "FAIL " + err);
      } catch (...) {
      }
      ::_exit(err.empty() ? 0 : 1);
    }
    ::close(sv[1]);
    ctl[r] = sv[0];
    pids[r] = pid;
  }

  auto kill_all = [&] {
    for (pid_t p : pids)
      if (p > 0) ::kill(p, SIGKILL);
  };
  bool ok = true;
  // Wire-up: endpoint of r for peer p goes to p.
  std::vector<std::vector<std::string>> eps(o.ranks, std::vector<std::string>(o.ranks));
  std::string msg;
  try {
    for (int r = 0; r < o.ranks && ok; ++r)
      for (int p = 0; p < o.ranks && ok; ++p)
        if (p != r && (!recv_frame(ctl[r], &eps[r][p]) || eps[r][p].rfind("FAIL ", 0) == 0)) {
          std::printf("roundtrip: %s\n", eps[r][p].c_str());
          ok = false;
        }
    for (int p = 0; p < o.ranks && ok; ++p)
      for (int r = 0; r < o.ranks; ++r)
        if (r != p) send_frame(ctl[p], eps[r][p]);
    for (int r = 0; r < o.ranks && ok; ++r) {
      ok = recv_frame(ctl[r], &msg) && msg == "ready";
      if (!ok) std::printf("roundtrip: rank %d: %s\n", r, msg.c_str());
    }
  } catch (const std::exception& e) {
    std::printf("roundtrip: %s\n", e.what());
    ok = false;
  }
  if (!ok) {
    std::printf("roundtrip: wire-up failed: FAIL\n");
    kill_all();
    while (::wait(nullptr) > 0) {
    }
    return 1;
  }
  for (int r = 0; r < o.ranks; ++r) send_frame(ctl[r], "go");

  // Results: every rank but the faulty one reports; the faulty one is reaped afterwards.
  int failures_expected = 0, failures_seen = 0;
  for (int r = 0; r < o.ranks; ++r) {
    if (r == faulty) continue;
    struct pollfd pfd {
      ctl[r], POLLIN, 0
    };
    if (::poll(&pfd, 1, static_cast<int>(o.timeout_ms) * 4 + 60000) <= 0 ||
        !recv_frame(ctl[r], &msg)) {
      std::printf("roundtrip: rank %d gave no result (hang?)\n", r);
      ok = false;
      continue;
    }
    std::printf("roundtrip: rank %d: %s\n", r, msg.c_str());
    if (reporter >= 0) {
      // The writer sees the error completion (naming the target and the verbs status); the
      // others see the writer fall silent or their own QP flushed: all name the round.
      bool names = msg.rfind("FAIL ", 0) == 0 &&
                   msg.find("lane " + o.device) != std::string::npos &&
                   msg.find("seq " + std::to_string(o.at_seq)) != std::string::npos &&
                   (r != reporter || msg.find(o.expect) != std::string::npos);
      ok = ok && names;
    } else if (faulty < 0) {
      ok = ok && msg == "ok";
    } else {
      ++failures_expected;
      // The record must name the faulty peer, the lane and the round.
      bool names = msg.rfind("FAIL ", 0) == 0 &&
                   msg.find("rank " + std::to_string(faulty) + " ") != std::string::npos &&
                   msg.find("lane " + o.device) != std::string::npos &&
                   msg.find("seq " + std::to_string(o.at_seq)) != std::string::npos &&
                   msg.find(o.expect) != std::string::npos;
      if (names) ++failures_seen;
    }
  }
  kill_all();
  for (int r = 0; r < o.ranks; ++r) ::waitpid(pids[r], nullptr, 0);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (faulty >= 0) ok = ok && failures_seen == failures_expected;
  std::printf("roundtrip: %d ranks, %d rounds x %u bytes%s: %s (%.2f s)\n", o.ranks, o.iters,
              o.bytes,
              reporter >= 0 ? ", bad rkey"
              : faulty < 0  ? ""
                            : (o.stop_rank >= 0 ? ", stopped rank" : ", killed rank"),
              ok ? "PASS" : "FAIL", secs);
  return ok ? 0 : 1;
}
