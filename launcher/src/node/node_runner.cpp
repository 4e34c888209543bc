#include "node_runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "exit_rules.hpp"
#include "flight_reader.hpp"
#include "held_server.hpp"
#include "job_dir.hpp"
#include "log/log.hpp"
#include "net/socket.hpp"
#include "ompi_direct_launch.hpp"
#include "orphan_guard.hpp"
#include "slow_lane.hpp"
#include "slow_rank.hpp"
#include "spark/protocol/shm_segment.hpp"
#include "spawn.hpp"
#include "stack_dump.hpp"
#include "status_socket.hpp"
#include "stderr_output.hpp"
#ifdef SPARK_LAUNCH_HAVE_PMIX
#include "local_topology.hpp"
#include "pmix_server.hpp"
#endif

namespace spark::launch {
namespace {

using Clock = std::chrono::steady_clock;

using net::Fd;

Fd checked(int fd, const char* what) {
  if (fd < 0) throw std::system_error(errno, std::generic_category(), what);
  return Fd(fd);
}

// Epoll tags: kind in the high half, index in the low half.
enum Kind : uint32_t {
  kSignal = 1,
  kWakeup,
  kTimeout,
  kGrace,
  kDrain,
  kOut,
  kErr,
  kStatus,
  kMetrics,
  kWatch
};

uint64_t tag(Kind k, uint32_t index = 0) {
  return (static_cast<uint64_t>(k) << 32) | index;
}

void arm(int tfd, double seconds) {
  struct itimerspec its;
  std::memset(&its, 0, sizeof its);
  double whole = std::floor(seconds);
  its.it_value.tv_sec = static_cast<time_t>(whole);
  its.it_value.tv_nsec = static_cast<long>((seconds - whole) * 1e9);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  ::timerfd_settime(tfd, 0, &its, nullptr);
}

struct Rank {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  bool started = false;
  bool ended = false;
  Fd out, err;
  std::unique_ptr<LineForwarder> out_fw, err_fw;
};

// The job's exit code once its first failure is recorded (-1 before): read by the fault
// handler below. Process-wide: one node runner per process.
std::atomic<int> g_failed_job_code{-1};

class Runner {
 public:
  explicit Runner(const NodeRunSpec& spec)
      : spec_(spec), t0_(spec.verbose_since.value_or(Clock::now())) {}
  ~Runner() {
    if (spec_.link.attach) spec_.link.attach({});  // the daemon's stop must not outlive us
    // Only on an error path: never leave a started rank behind.
    for (const auto& r : ranks_) {
      if (r.started && !r.ended) ::kill(-r.pid, SIGKILL);
    }
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;
  int run();

 private:
  // A step of this node's launch: -v prints it with its time, SPARK_LOG=info (launch) logs it.
  void trace(const std::string& what) {
    if (spec_.verbose) say_elapsed(t0_, what);
    log::write(log::Level::info, "launch", what);
  }
  void setup_loop();
  void add_fd(int fd, uint64_t t);
  void start_ranks();
  void loop();
  void on_signal();
  void on_output(Rank& r, bool is_err);
  void reap();
  void begin_abort();
  void kill_all(int signo);
  void post(std::function<void()> fn);
  void run_posted();
  bool all_ended() const;
  bool all_closed() const;
  // `sparkrun status` (status_socket.hpp) and a failed job's report (--report-dir).
  void on_status_request();
  std::string status_reply();
  std::string metrics_text();
  std::string stacks_reply();
  void report_failure();
  std::string report_dir() const;
  std::string report_file(const std::string& stem, const std::string& ext) const {
    return spec_.report_per_host
               ? stem + "." + spec_.plan.nodes.at(static_cast<size_t>(spec_.node)).host + ext
               : stem + ext;
  }
  std::string write_stacks(const std::string& dir);
  std::vector<RankFlight> read_flights();

  const NodeRunSpec& spec_;
  Clock::time_point t0_;
  ExitTracker tracker_;
  std::vector<Rank> ranks_;
  Fd epoll_, sigfd_, wake_, timeout_timer_, grace_timer_, drain_timer_;
  bool aborting_ = false;
  std::atomic<bool> abort_started_{false};  // aborting_, readable from PMIx's thread
  bool killed_ = false;
  bool draining_ = false;
  std::mutex queue_mutex_;
  std::deque<std::function<void()>> queue_;
  std::unique_ptr<OrphanGuard> guard_;
  std::string job_dir_;
  std::unique_ptr<StatusSocket> status_;
  std::unique_ptr<MetricsServer> metrics_;
  Fd watch_timer_;  // the slow-rank watch's period (slow_rank.hpp)
  SlowRankWatch slow_ranks_;
  SlowLaneWatch slow_lanes_;
  void on_watch();
  // The previous status request's counters per rank: rates over the time between requests.
  struct Sample {
    std::int64_t ns = 0;
    std::uint64_t completed = 0, bytes = 0;
    std::vector<RankFlight::Lane> lanes;  ///< by row (rows are only added)
  };
  std::map<int, Sample> last_sample_;
  bool timed_out_ = false;  // the first failure is a rank's fail-stop timeout
#ifdef SPARK_LAUNCH_HAVE_PMIX
  std::unique_ptr<LocalTopology> topology_;  // outlives pmix_ (declared first)
  std::unique_ptr<PmixServer> pmix_;
#endif
};

void Runner::add_fd(int fd, uint64_t t) {
  struct epoll_event ev;
  std::memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.u64 = t;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    throw std::system_error(errno, std::generic_category(), "epoll_ctl");
  }
}

void Runner::setup_loop() {
  epoll_ = checked(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  // The signals were blocked by main() before any thread existed (see main.cpp).
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  sigfd_ = checked(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd");
  wake_ = checked(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  timeout_timer_ =
      checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd");
  grace_timer_ = checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd");
  drain_timer_ = checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd");
  add_fd(sigfd_.get(), tag(kSignal));
  add_fd(wake_.get(), tag(kWakeup));
  add_fd(timeout_timer_.get(), tag(kTimeout));
  add_fd(grace_timer_.get(), tag(kGrace));
  add_fd(drain_timer_.get(), tag(kDrain));
}

// Called from PMIx's thread: queue the work and wake the loop.
void Runner::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  ssize_t n = ::write(wake_.get(), &one, sizeof one);
  (void)n;
}

void Runner::run_posted() {
  uint64_t count;
  ssize_t n = ::read(wake_.get(), &count, sizeof count);
  (void)n;
  std::deque<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    work.swap(queue_);
  }
  for (auto& fn : work) fn();
}

bool Runner::all_ended() const {
  for (const auto& r : ranks_) {
    if (r.started && !r.ended) return false;
  }
  return true;
}

bool Runner::all_closed() const {
  for (const auto& r : ranks_) {
    if (r.out || r.err) return false;
  }
  return true;
}

void Runner::kill_all(int signo) {
  // Whole process groups: the rank and whatever it started. Ranks that ended already may
  // have left children in their group, so they are included.
  for (const auto& r : ranks_) {
    if (r.pid <= 0) continue;
    ::kill(-r.pid, signo);
    if (signo == SIGTERM) ::kill(-r.pid, SIGCONT);  // a stopped rank must see SIGTERM
  }
}

void Runner::begin_abort() {
  if (aborting_) return;
  aborting_ = true;
  abort_started_ = true;
  if (tracker_.failed()) g_failed_job_code = tracker_.exit_code();
  if (tracker_.failed()) {
    std::vector<std::pair<int, pid_t>> running;
    for (const auto& r : ranks_) {
      if (!r.started || r.ended) continue;
      running.emplace_back(r.rank, r.pid);
      if (auto note = stopped_note(r.rank, r.pid)) say(*note);
    }
#ifdef SPARK_LAUNCH_HAVE_PMIX
    // The ranks' records say only that the server did not answer; this says who held it.
    if (pmix_)
      if (auto note = held_server_note(running)) say(*note);
#endif
    // Before any rank is stopped: their recorders (and stacks after a timeout) as they are.
    if (spec_.write_report) report_failure();
  }
  // Multi-host: the node's first failure goes to the launcher, which stops the other nodes.
  if (spec_.link.failed && tracker_.failed())
    spec_.link.failed(tracker_.exit_code(), tracker_.failure_line(), timed_out_);
  trace("group abort: SIGTERM to every rank");
  if (spec_.kill_grace_s <= 0) {
    kill_all(SIGKILL);
    killed_ = true;
    return;
  }
  kill_all(SIGTERM);
  arm(grace_timer_.get(), spec_.kill_grace_s);
}

void Runner::start_ranks() {
  const JobPlan& plan = spec_.plan;
  const NodePlan& node = plan.nodes.at(static_cast<size_t>(spec_.node));
  const int local_size = static_cast<int>(node.ranks.size());
  ranks_.resize(node.ranks.size());
  const bool bound = !spec_.cpusets.empty();
  const std::vector<EnvVar> glue = open_mpi_direct_launch_env(bound);

  // -v / --report-bindings: the ranks report their per-peer transport and lanes (a user's own
  // SPARK_LOG, in the environment or with -x, wins).
  const std::vector<EnvVar> wireup_log =
      spec_.report_wireup
          ? unless_set({{"SPARK_LOG", "info:wireup"}}, spec_.base_env, spec_.exports)
          : std::vector<EnvVar>{};
  // Build every rank's request first (PMIx registration is done before any fork).
  std::vector<SpawnRequest> reqs(node.ranks.size());
  for (int l = 0; l < local_size; ++l) {
    Rank& r = ranks_[static_cast<size_t>(l)];
    r.rank = node.ranks[static_cast<size_t>(l)];
    r.local_rank = l;
    RankIdentity id;
    id.rank = r.rank;
    id.size = plan.size;
    id.local_rank = l;
    id.local_size = local_size;
    id.node_rank = spec_.node;
    id.job_id = spec_.job_id;
    id.host = node.host;
    id.job_dir = job_dir_;
    if (static_cast<size_t>(l) < spec_.cpuset_text.size())
      id.cpuset = spec_.cpuset_text[static_cast<size_t>(l)];
    if (static_cast<size_t>(l) < spec_.lanes.size()) id.lanes = spec_.lanes[static_cast<size_t>(l)];
    std::vector<EnvVar> pmix_env;
#ifdef SPARK_LAUNCH_HAVE_PMIX
    pmix_env = pmix_->client_env(r.rank);
#endif
    SpawnRequest& req = reqs[static_cast<size_t>(l)];
    req.path = spec_.program_path;
    req.argv = spec_.argv;
    // PWD says where the rank runs (shells and getcwd-avoiding code read it), as mpirun sets it.
    std::vector<EnvVar> pwd;
    if (!spec_.working_dir.empty()) pwd.emplace_back("PWD", spec_.working_dir);
    const std::vector<EnvVar> nccl =
        static_cast<size_t>(l) < spec_.nccl_env.size()
            ? unless_set(spec_.nccl_env[static_cast<size_t>(l)], spec_.base_env, spec_.exports)
            : std::vector<EnvVar>{};
    req.envp = build_env(spec_.base_env,
                         {torchrun_env(id, spec_.base_env, spec_.exports), nccl, wireup_log,
                          spec_.exports, pwd, pmix_env, glue, identity_env(id)});
    req.cwd = spec_.working_dir;
    if (bound && spec_.cpusets[static_cast<size_t>(l)])
      req.cpuset = spec_.cpusets[static_cast<size_t>(l)];
    if (r.rank == 0) req.stdin_fd = STDIN_FILENO;  // stdin goes to rank 0 only

    if (!spec_.output_dir.empty()) {
      std::string dir = spec_.output_dir + "/rank." + std::to_string(r.rank);
      std::error_code ec;                            // errors show up at open below
      std::filesystem::create_directories(dir, ec);  // also DIR/attempt.K (--max-restarts)
      for (int which = 0; which < 2; ++which) {
        std::string file = dir + (which == 0 ? "/stdout" : "/stderr");
        int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
          throw std::runtime_error("--output-dir: cannot create " + file + ": " +
                                   std::strerror(errno));
        }
        (which == 0 ? req.stdout_fd : req.stderr_fd) = fd;
      }
    } else {
      for (int which = 0; which < 2; ++which) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
          throw std::system_error(errno, std::generic_category(), "pipe2");
        ::fcntl(p[0], F_SETFL, O_NONBLOCK);
        (which == 0 ? r.out : r.err) = Fd(p[0]);
        (which == 0 ? req.stdout_fd : req.stderr_fd) = p[1];
        const int target = which == 0 ? STDOUT_FILENO : STDERR_FILENO;
        (which == 0 ? r.out_fw : r.err_fw) = std::make_unique<LineForwarder>(
            r.rank, spec_.format, [target](std::string_view line) { write_all(target, line); });
        add_fd(p[0], tag(which == 0 ? kOut : kErr, static_cast<uint32_t>(l)));
      }
    }
  }
  trace("environment of " + std::to_string(local_size) + " ranks built");

  // Fork all, then collect the exec results (the ranks start in parallel).
  std::vector<StartedChild> children(reqs.size());
  for (size_t l = 0; l < reqs.size(); ++l) {
    children[l] = start_child(reqs[l]);
    ranks_[l].pid = children[l].pid;
    ranks_[l].started = true;
    guard_->watch(children[l].pid);
    ::close(reqs[l].stdout_fd);
    ::close(reqs[l].stderr_fd);
  }
  for (size_t l = 0; l < reqs.size(); ++l) {
    if (auto failure = await_exec(children[l], spec_.program_path)) {
      if (tracker_.start_failed(ranks_[l].rank, *failure)) say(tracker_.failure_line());
      begin_abort();
    }
  }
  trace("ranks started");
}

void Runner::on_output(Rank& r, bool is_err) {
  Fd& fd = is_err ? r.err : r.out;
  LineForwarder& fw = is_err ? *r.err_fw : *r.out_fw;
  char buf[65536];
  // At most 1 MiB per wake-up: a rank that floods its output must not starve the others
  // (epoll is level-triggered, so the rest comes on the next round).
  for (int round = 0; round < 16; ++round) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      fw.feed(std::string_view(buf, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    fw.finish();  // EOF or error: the stream is over
    fd.reset();   // closing removes it from epoll
    return;
  }
}

void Runner::reap() {
  // Every exit available now first: when a rank dies in wire-up, the others' PMIx fence fails
  // and they exit (status 1) within the same instant, and waitpid returns zombies in fork
  // order, not in order of death. Among exits seen together a death by signal is the cause:
  // it is reported first (found by tests/fault/soak.sh: "rank 1 exited with status 1" named
  // instead of the SIGKILLed rank 2).
  std::vector<std::pair<pid_t, int>> exits;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    exits.emplace_back(pid, status);
  }
  std::stable_partition(exits.begin(), exits.end(),
                        [](const auto& e) { return WIFSIGNALED(e.second); });
  for (const auto& [pid, status] : exits) {
    for (auto& r : ranks_) {
      if (r.pid != pid || r.ended) continue;
      r.ended = true;
      trace("rank " + std::to_string(r.rank) + " ended");
      if (aborting_) break;  // our own SIGTERM/SIGKILL (or a late failure): not the cause
      if (tracker_.rank_ended(r.rank, pid, status)) {
        say(tracker_.failure_line());
        begin_abort();
      }
      break;
    }
  }
}

void Runner::on_signal() {
  struct signalfd_siginfo si;
  while (::read(sigfd_.get(), &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
    const int signo = static_cast<int>(si.ssi_signo);
    switch (signo) {
      case SIGCHLD:
        reap();
        break;
      case SIGUSR1:
      case SIGUSR2:
        // To the rank itself by default: its children (data-loader or engine workers) often
        // keep SIGUSR1's default action, which would end them.
        for (const auto& r : ranks_) {
          if (r.started && !r.ended) ::kill(spec_.signal_group ? -r.pid : r.pid, signo);
        }
        break;
      default:  // SIGINT, SIGTERM, SIGHUP, SIGQUIT
        if (aborting_) {
          // Asked twice: no more grace.
          kill_all(SIGKILL);
          killed_ = true;
          break;
        }
        if (tracker_.interrupted(signo)) say(tracker_.failure_line());
        begin_abort();
        break;
    }
  }
}

void Runner::loop() {
  struct epoll_event events[64];
  for (;;) {
    if (all_ended()) {
      if (all_closed()) break;
      if (!draining_) {
        // A rank's child may keep its output pipe open; give it a moment, then stop.
        draining_ = true;
        arm(drain_timer_.get(), 0.5);
      }
    }
    int n = ::epoll_wait(epoll_.get(), events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "epoll_wait");
    }
    // PMIx work first: an abort is queued before the aborting rank can exit, so handling
    // the queue first makes the abort (not the exit) the recorded cause.
    run_posted();
    bool drain_expired = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t t = events[i].data.u64;
      const auto kind = static_cast<Kind>(t >> 32);
      const auto index = static_cast<size_t>(t & 0xffffffffu);
      uint64_t ticks;
      switch (kind) {
        case kSignal:
          on_signal();
          break;
        case kWakeup:
          break;  // handled above
        case kTimeout:
          if (::read(timeout_timer_.get(), &ticks, sizeof ticks) > 0 && !aborting_) {
            if (tracker_.timed_out(*spec_.timeout_s)) say(tracker_.failure_line());
            begin_abort();
          }
          break;
        case kGrace:
          if (::read(grace_timer_.get(), &ticks, sizeof ticks) > 0 && !killed_) {
            trace("kill grace over: SIGKILL to every rank");
            kill_all(SIGKILL);
            killed_ = true;
          }
          break;
        case kDrain:
          if (::read(drain_timer_.get(), &ticks, sizeof ticks) > 0) drain_expired = true;
          break;
        case kStatus:
          on_status_request();
          break;
        case kMetrics:
          metrics_->serve([this] { return metrics_text(); });
          break;
        case kWatch:
          if (::read(watch_timer_.get(), &ticks, sizeof ticks) > 0 && !aborting_) on_watch();
          break;
        case kOut:
        case kErr:
          if (index < ranks_.size()) {
            Rank& r = ranks_[index];
            if ((kind == kOut ? r.out : r.err)) on_output(r, kind == kErr);
          }
          break;
      }
    }
    if (drain_expired) {
      for (auto& r : ranks_) {
        if (r.out) on_output(r, false), r.out_fw->finish(), r.out.reset();
        if (r.err) on_output(r, true), r.err_fw->finish(), r.err.reset();
      }
    }
  }
}

// Two pipes per rank stay open for the whole job: lift the soft fd limit when that many
// ranks need it (only as far as needed: the ranks inherit the limit).
void raise_fd_limit(size_t ranks) {
  struct rlimit rl;
  const rlim_t need = static_cast<rlim_t>(4 * ranks + 256);
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
    rl.rlim_cur = std::min(need, rl.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// PMIx 4.2 (Debian 12) can use freed memory on its own thread when clients that wait in a
// fence are killed in a group abort (a rank called PMIx_Abort): sparkrun then died by
// SIGSEGV about 1 run in 3 instead of reporting the job's code. The job's outcome is
// already recorded by then, so the fault handler ends sparkrun with that code. Not a cure
// for the library's fault: a fault before any failure is recorded still crashes normally.
std::array<char, 256> g_fault_line{};
std::size_t g_fault_line_size = 0;

void on_fault(int signo) {
  const int code = g_failed_job_code.load();
  if (code < 0) {
    ::signal(signo, SIG_DFL);
    ::raise(signo);
    return;
  }
  ssize_t n = ::write(STDERR_FILENO, g_fault_line.data(), g_fault_line_size);
  (void)n;
  ::_exit(code);
}

void install_fault_guard() {
  // Made here, not in the handler (no allocation there): a daemon's line names its host.
  const std::string line =
      "sparkrun: " + host_line("PMIx faulted during the group abort; exiting with the job's code") +
      "\n";
  g_fault_line_size = std::min(line.size(), g_fault_line.size());
  std::memcpy(g_fault_line.data(), line.data(), g_fault_line_size);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fault;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGSEGV, &sa, nullptr);
  ::sigaction(SIGBUS, &sa, nullptr);
}

std::vector<RankFlight> Runner::read_flights() {
  std::vector<RankFlight> out;
  for (const auto& r : ranks_)
    if (r.started)
      if (auto f = read_flight(spec_.job_id, r.rank)) out.push_back(std::move(*f));
  return out;
}

std::string Runner::report_dir() const {
  return launch::report_dir(spec_.report_dir, spec_.job_id);
}

std::string Runner::write_stacks(const std::string& dir) {
  std::vector<StackTarget> targets;
  for (const auto& r : ranks_)
    if (r.started && !r.ended)
      targets.push_back({r.rank, r.pid, python_stack_file(job_dir_, r.rank)});
  if (targets.empty()) return {};
  const std::string text = collect_stacks(targets, kStackBudget);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string file = dir + "/" + report_file("stacks", ".txt");
  std::ofstream out(file);
  out << text;
  return out.good() ? file : std::string();
}

void Runner::report_failure() {
  const std::vector<RankFlight> flights = read_flights();
  // A rank that timed out, or the job's --timeout: the ranks are stuck somewhere; where is in
  // their stacks. Other failures (a crash, an exit) leave stacks that say little.
  const bool stuck = timed_out_ || tracker_.exit_code() == kExitTimeout;
  if (flights.empty() && !stuck) return;
  const std::string dir = report_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    say("cannot write the report to " + dir + ": " + ec.message() + " (--report-dir)");
    return;
  }
  std::vector<std::string> files;
  if (!flights.empty()) {
    say("each rank's last operations (flight recorder):");
    for (const auto& f : flights)
      if (!f.entries.empty())
        say("  rank " + std::to_string(f.rank) + " (pid " + std::to_string(f.pid) +
            "): " + describe_entry(f, f.entries.back()));
    const std::vector<std::string> notes = divergence_notes(flights);
    for (const auto& n : notes) say(n);
    nlohmann::json j = nlohmann::json::object();
    j["job"] = spec_.job_id;
    j["host"] = spec_.plan.nodes.at(static_cast<size_t>(spec_.node)).host;
    j["failure"] = tracker_.failure_line();
    j["divergence"] = notes;
    j["ranks"] = nlohmann::json::array();
    for (const auto& f : flights) j["ranks"].push_back(flight_json(f));
    std::ofstream(dir + "/" + report_file("flight", ".json")) << j.dump(1) << "\n";
    files.push_back(report_file("flight", ".json"));
  }
  if (stuck) {
    const auto t0 = Clock::now();
    if (!write_stacks(dir).empty())
      files.push_back(
          report_file("stacks", ".txt") + ", " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()) +
          " ms");
  }
  std::string list;
  for (const auto& f : files) list += (list.empty() ? "" : "; ") + f;
  say("report: " + dir + " (" + list + ")");
}

std::string Runner::status_reply() {
  std::vector<RankFlight> flights = read_flights();
  // Rates need two readings: the previous request's, or one 200 ms apart when it is old.
  const auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
  };
  constexpr std::int64_t kMinWindowNs = 200'000'000, kMaxWindowNs = 30'000'000'000;
  std::int64_t oldest = 0;
  for (const auto& [rank, s] : last_sample_) oldest = std::max(oldest, now_ns() - s.ns);
  if (!flights.empty() && (last_sample_.empty() || oldest > kMaxWindowNs)) {
    last_sample_.clear();
    for (const auto& f : flights)
      last_sample_[f.rank] = {f.read_ns, f.completed, f.bytes_done, f.lanes};
    oldest = 0;
  }
  if (!flights.empty() && oldest < kMinWindowNs) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(kMinWindowNs - oldest));
    flights = read_flights();
  }
  std::map<int, const RankFlight*> by_rank;
  for (const auto& f : flights) by_rank[f.rank] = &f;
  const NodePlan& node = spec_.plan.nodes.at(static_cast<size_t>(spec_.node));
  nlohmann::json j = nlohmann::json::object();
  j["job"] = spec_.job_id;
  j["launcher_pid"] = ::getpid();
  j["size"] = spec_.plan.size;
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : ranks_) {
    nlohmann::json row = nlohmann::json::object();
    row["rank"] = r.rank;
    row["host"] = node.host;
    row["pid"] = r.pid;
    std::string state = !r.started ? "starting" : r.ended ? "exited" : "running";
    if (state == "running" && stopped_note(r.rank, r.pid)) state = "stopped";
    const auto it = by_rank.find(r.rank);
    if (it != by_rank.end()) {
      const RankFlight& f = *it->second;
      row["ops_completed"] = f.completed;
      row["bytes_completed"] = f.bytes_done;
      nlohmann::json lanes = lanes_json(f);
      if (auto prev = last_sample_.find(r.rank); prev != last_sample_.end()) {
        const Sample& p = prev->second;
        const double dt = static_cast<double>(f.read_ns - p.ns) / 1e9;
        if (dt > 0) {
          row["ops_per_s"] = static_cast<double>(f.completed - p.completed) / dt;
          row["bytes_per_s"] = static_cast<double>(f.bytes_done - p.bytes) / dt;
          row["rate_window_s"] = dt;
          // Per lane: bytes sent per second, the share of the window the rank's waits blocked
          // on it and the share it had data in flight.
          for (std::size_t i = 0; i < f.lanes.size() && i < p.lanes.size(); ++i) {
            lanes[i]["bytes_per_s"] = static_cast<double>(f.lanes[i].bytes - p.lanes[i].bytes) / dt;
            lanes[i]["blocked_share"] =
                static_cast<double>(f.lanes[i].blocked_ns - p.lanes[i].blocked_ns) / 1e9 / dt;
            lanes[i]["busy_share"] =
                static_cast<double>(f.lanes[i].busy_ns - p.lanes[i].busy_ns) / 1e9 / dt;
          }
        }
      }
      row["lanes"] = std::move(lanes);
      last_sample_[r.rank] = {f.read_ns, f.completed, f.bytes_done, f.lanes};
      if (!f.entries.empty()) {
        const auto& e = f.entries.back();
        nlohmann::json cur = entry_json(f, e);
        if (state == "running" && e.state == protocol::flight::State::running && e.e.waiting)
          state = "waiting";
        row["current"] = cur;
        row["summary"] = describe_entry(f, e);
      }
    }
    row["state"] = state;
    j["ranks"].push_back(std::move(row));
  }
  return j.dump() + "\n";
}

void Runner::on_watch() {
  std::map<int, std::string> host_of;
  for (const auto& n : spec_.plan.nodes)
    for (const int r : n.ranks) host_of[r] = n.host;
  const std::vector<RankFlight> flights = read_flights();
  for (const auto& w : slow_ranks_.sample(flights, host_of)) say(w);
  for (const auto& w : slow_lanes_.sample(flights, host_of)) say(w);
}

std::string Runner::metrics_text() {
  const std::vector<RankFlight> flights = read_flights();
  const std::string host = spec_.plan.nodes.at(static_cast<size_t>(spec_.node)).host;
  std::vector<RankMetrics> rows;
  for (const auto& r : ranks_) {
    RankMetrics m;
    m.rank = r.rank;
    m.host = host;
    for (const auto& f : flights)
      if (f.rank == r.rank) {
        m.flight = &f;
        m.failed = !f.entries.empty() && f.entries.back().state == protocol::flight::State::failed;
      }
    rows.push_back(m);
  }
  return openmetrics_text(spec_.job_id, rows, tracker_.failed() ? 1 : 0);
}

std::string Runner::stacks_reply() {
  nlohmann::json j = nlohmann::json::object();
  const std::string file = write_stacks(report_dir());
  j["job"] = spec_.job_id;
  j["file"] = file;
  if (file.empty()) j["error"] = "no running rank, or the report folder cannot be written";
  return j.dump() + "\n";
}

void Runner::on_status_request() {
  auto req = status_->accept_request();
  if (!req) return;
  std::string reply;
  if (req->what == "status")
    reply = status_reply();
  else if (req->what == "stacks")
    reply = stacks_reply();
  else if (req->what == "metrics")  // the launcher of a multi-host job merges the hosts' texts
    reply = metrics_text();
  else
    reply = R"({"error":"unknown request"})"
            "\n";
  StatusSocket::reply(*req, reply);
}

int Runner::run() {
  install_fault_guard();
  raise_fd_limit(spec_.plan.nodes.at(static_cast<size_t>(spec_.node)).ranks.size());
  JobDir tmp;
  job_dir_ = tmp.path();
  setup_loop();
  try {
    status_ = std::make_unique<StatusSocket>(job_dir_);
    add_fd(status_->fd(), tag(kStatus));
  } catch (const std::exception& e) {  // the job runs anyway, without `sparkrun status`
    log::write(log::Level::warn, "launch", std::string("no status socket: ") + e.what());
  }
  if (spec_.plan.size > 1) {  // the slow-rank watch: a few ms of reading per second
    watch_timer_ =
        checked(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK), "timerfd");
    struct itimerspec its {};
    its.it_value.tv_nsec = its.it_interval.tv_nsec =
        std::chrono::nanoseconds(SlowRankWatch::kSamplePeriod).count();
    ::timerfd_settime(watch_timer_.get(), 0, &its, nullptr);
    add_fd(watch_timer_.get(), tag(kWatch));
  }
  if (spec_.metrics) {  // asked for: a port that cannot be had stops the launch
    metrics_ = std::make_unique<MetricsServer>(*spec_.metrics);
    add_fd(metrics_->fd(), tag(kMetrics));
  }
  // Before PMIx creates threads: the watcher is forked from a single-threaded process.
  guard_ = std::make_unique<OrphanGuard>(static_cast<int>(spec_.plan.size));
  const std::string shm_prefix = protocol::shm_segment::job_prefix(spec_.job_id);
  guard_->remove_on_death(tmp.path(), shm_prefix);
  trace(guard_->forked() ? "orphan watcher started (fork: clone(CLONE_VM) refused here)"
                         : "orphan watcher started");
#ifdef SPARK_LAUNCH_HAVE_PMIX
  PmixHooks hooks;
  hooks.abort = [this](int rank, int status, std::string message, std::function<void()> done) {
    post([this, rank, status, message = std::move(message), done = std::move(done)] {
      pid_t pid = -1;
      for (const auto& r : ranks_) {
        if (r.rank == rank) pid = r.pid;
      }
      // A rank that died (kill -9) makes its peers abort at once ("rank N: ... rank P closed its
      // connection ..."), often before its own exit is visible: give its exit up to 100 ms, so
      // the dead rank (the cause) is reported before the records of those that saw it go.
      reap();
      if (!aborting_ && message.find(" closed its connection") != std::string::npos) {
        for (int i = 0; i < 50 && !tracker_.failed(); ++i) {
          ::usleep(2000);
          reap();
        }
      }
      say("rank " + std::to_string(rank) +
          " aborted: " + (message.empty() ? std::string("(no message)") : message));
      // A fail-stop timeout's record (failure.cpp: "... (timeout N ms)"): the job is stuck.
      if (!aborting_ && message.find(" (timeout ") != std::string::npos) timed_out_ = true;
      if (!aborting_ && tracker_.rank_aborted(rank, pid, status, message)) {
        say(tracker_.failure_line());
      }
      begin_abort();
      done();  // releases the client from PMIx_Abort
    });
  };
  if (spec_.link.fence) {  // node daemon: the launcher combines every node's data
    hooks.fence = [this](FenceRequest req) {
      spec_.link.fence(std::move(req.data), std::move(req.complete));
    };
  }
  // One node: no fence hook; PMIx's thread completes the fence itself (its contributions
  // are the whole job's), without a hop through the loop.
  // One hwloc load per launch: the binding step's topology of this machine when there is one.
  void* hwloc_topology = spec_.hwloc_topology;
  if (hwloc_topology == nullptr) {
    topology_ = std::make_unique<LocalTopology>();
    hwloc_topology = topology_->get();
    trace("topology loaded");
  }
  pmix_ = std::make_unique<PmixServer>(tmp.path(), hooks, hwloc_topology);
  trace("PMIx server up");
  PmixJob job;
  job.nspace = spec_.job_id;
  job.size = spec_.plan.size;
  job.universe_size = spec_.plan.size;
  for (const auto& n : spec_.plan.nodes) {
    job.node_hosts.push_back(n.host);
    job.node_ranks.push_back(n.ranks);
  }
  job.this_node = spec_.node;
  job.tmpdir = tmp.path();
  job.cpusets = spec_.cpuset_text;  // PMIX_CPUSET per bound rank
  pmix_->register_job(job, ::getuid(), ::getgid());
  trace("PMIx job registered");
#endif
  if (spec_.link.attach) {
    // The daemon's control link orders stops from its own thread: queue them on the loop.
    spec_.link.attach([this](bool now, bool stuck) {
      post([this, now, stuck] {
        // Another host failed: this host's part of the report, before its ranks are stopped
        // (with their stacks when the ranks there timed out: every host's ranks are stuck).
        if (stuck) timed_out_ = true;
        if (!aborting_ && spec_.write_report && !tracker_.failed()) report_failure();
        if (!now) return begin_abort();
        aborting_ = true;
        abort_started_ = true;
        kill_all(SIGKILL);
        killed_ = true;
      });
    });
  }
  start_ranks();
  if (spec_.timeout_s) arm(timeout_timer_.get(), *spec_.timeout_s);
  loop();
  trace("every rank ended");
  // Segments of ranks that died before unlinking theirs (killed during wire-up).
  std::vector<int> own_ranks;
  for (const auto& r : ranks_) own_ranks.push_back(r.rank);
  if (const int n = OrphanGuard::remove_shm_leftovers(spec_.job_id, own_ranks); n > 0)
    trace("removed " + std::to_string(n) + " shm segment(s) the ranks left in /dev/shm");
  guard_->disarm();
#ifdef SPARK_LAUNCH_HAVE_PMIX
  run_posted();  // aborts queued at the very end: release their PMIx waits now
  if (spec_.exit_after_run) {
    // Every rank has ended and the process ends next: no PMIx teardown (see leave_to_exit).
    pmix_->leave_to_exit();
    (void)pmix_.release();
    (void)topology_.release();
    if (spec_.topology_owner) (void)new std::shared_ptr<const void>(spec_.topology_owner);
    trace("PMIx server left to the exit");
  } else if (pmix_->finalize(std::chrono::seconds(2), sigfd_.get())) {
    pmix_.reset();
    trace("PMIx server finalized");
  } else {
    // Never a hang: the job is over, its code is known; PMIx is left running and the
    // process leaves with _exit (main.cpp).
    say("PMIx server did not shut down (timeout or signal); exiting without it");
    (void)pmix_.release();  // PMIx's threads may still use it until _exit
    // ... and the topology it was given: keep it alive too (never freed).
    (void)topology_.release();
    if (spec_.topology_owner) (void)new std::shared_ptr<const void>(spec_.topology_owner);
  }
#endif
  return tracker_.exit_code();
}

}  // namespace

int run_node(const NodeRunSpec& spec) {
  Runner runner(spec);
  return runner.run();
}

}  // namespace spark::launch
