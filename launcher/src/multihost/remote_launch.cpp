#include "remote_launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>  // before Asio (Boost 1.74 + g++ 12)

#include <algorithm>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "control/messages.hpp"
#include "control/server.hpp"
#include "exit_rules.hpp"
#include "job_dir.hpp"
#include "log/log.hpp"
#include "metrics_server.hpp"
#include "rank_env.hpp"
#include "remote_address.hpp"
#include "remote_agent.hpp"
#include "spawn.hpp"
#include "stack_dump.hpp"
#include "status_socket.hpp"
#include "stderr_output.hpp"

extern char** environ;

namespace spark::launch {
namespace {

namespace asio = boost::asio;
namespace ctl = control;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kConnectTimeout = 60s;  // agent start + daemon connect (ssh can be slow)
constexpr auto kHeartbeat = 1000ms;
constexpr auto kLinkTimeout = 10000ms;
constexpr auto kStatusGather = 4000ms;  // the daemons' answers to a status request

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot find sparkrun's own path (/proc/self/exe)");
  return std::string(buf, static_cast<size_t>(n));
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + std::to_string(WTERMSIG(status));
  return "status ?";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
  return s;
}

// One of the daemon's output streams (the agent's stdout or stderr): passed on in whole
// lines, so that lines of different hosts never mix.
struct Stream {
  std::unique_ptr<asio::posix::stream_descriptor> fd;
  int target = STDOUT_FILENO;
  std::string pending;
  bool eof = true;
  std::array<char, 65536> buf{};
};

struct Node {
  std::string host;
  bool local = false;
  std::vector<std::string> command;
  pid_t agent = -1;
  bool agent_ended = true;
  int agent_status = 0;  ///< waitpid's status once agent_ended
  bool authenticated = false;
  bool done = false;
  bool lost = false;
  Stream out, err;
};

class Coordinator {
 public:
  explicit Coordinator(const MultiHostSpec& spec)
      : spec_(spec),
        t0_(Clock::now()),
        timeout_timer_(io_),
        connect_timer_(io_),
        finish_timer_(io_),
        agent_timer_(io_),
        sig_(io_) {}
  ~Coordinator() {
    for (auto& n : nodes_) {
      if (n.agent > 0 && !n.agent_ended) ::kill(-n.agent, SIGKILL);
    }
  }
  int run();

 private:
  // A step of the launch on some host: -v prints it with its time, SPARK_LOG=info (launch)
  // logs it.
  void trace(const std::string& what) {
    if (spec_.verbose) say_elapsed(t0_, what);
    log::write(log::Level::info, "launch", what);
  }
  void start_agent(std::uint32_t i, const std::string& secret_hex);
  void read_stream(std::uint32_t i, Stream& s);
  void read_signals();
  void reap();
  void on_authenticated(std::uint32_t i);
  void on_message(std::uint32_t i, const ctl::Frame& f);
  void on_lost(std::uint32_t i, const std::string& reason);
  void agent_exited_early(Node& n);
  void fail(int code, const std::string& line, bool print);
  void begin_abort(bool now);
  void check_finished();
  // `sparkrun status` on the launch host: every node daemon's rows, gathered over the control
  // plane (kStatusAsk / kStatusReply) and answered on this launcher's own status socket.
  // --metrics-port likewise: every daemon's node runner's OpenMetrics text, merged.
  void start_status_socket();
  void wait_status_request();
  void on_status_request();
  void start_metrics_server();
  void wait_metrics_request();
  void on_metrics_request();
  std::uint64_t gather(const std::string& what);  // asks every running daemon; the gather's id
  void answer_status(std::uint64_t id);

  const MultiHostSpec& spec_;
  std::vector<EnvVar> exports_;  // spec_.exports plus torchrun's MASTER_ADDR/MASTER_PORT
  Clock::time_point t0_;
  asio::io_context io_;
  std::unique_ptr<ctl::ControlServer> server_;
  std::vector<Node> nodes_;
  asio::steady_timer timeout_timer_, connect_timer_, finish_timer_;
  asio::steady_timer agent_timer_;  // an ended agent's last frames: see reap()
  asio::posix::stream_descriptor sig_;
  signalfd_siginfo si_{};
  std::optional<int> code_;
  bool aborting_ = false;
  bool kill_now_sent_ = false;
  bool timed_out_ = false;  // the first failure is a fail-stop timeout or --timeout
  std::size_t authenticated_ = 0;
  std::map<std::uint64_t, std::vector<std::optional<std::string>>> fences_;
  ExitTracker tracker_;  // for the wording of timeout / interrupt lines
  std::unique_ptr<JobDir> job_dir_;
  std::unique_ptr<StatusSocket> status_;
  std::unique_ptr<asio::posix::stream_descriptor> status_wait_;  // a dup of status_'s fd
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<asio::posix::stream_descriptor> metrics_wait_;  // a dup of metrics_'s fd
  struct StatusGather {
    std::string what;  // "status" (req answers) or "metrics" (http answers)
    StatusSocket::Request req;
    net::Fd http;
    std::map<std::uint32_t, std::string> replies;  // node -> its runner's JSON
    std::size_t asked = 0;
    std::unique_ptr<asio::steady_timer> timer;
  };
  std::map<std::uint64_t, StatusGather> status_gathers_;
  std::uint64_t next_status_id_ = 0;
  // A failed job's report: the hosts' parts (kReportFile) written on this host.
  void write_report_file(const Node& n, const ctl::ReportFile& f);
  std::string report_dir() const;
  std::vector<std::string> report_files_;
};

std::string Coordinator::report_dir() const {
  return launch::report_dir(spec_.report_dir, spec_.job_id);
}

void Coordinator::write_report_file(const Node& n, const ctl::ReportFile& f) {
  const std::string dir = report_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // Whole or not at all: the host may share this folder (NFS, one machine) and be writing
  // the same file; a reader never sees half of it.
  const std::string tmp = dir + "/." + f.name + "." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << f.content;
    if (!out.good()) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(tmp, dir + "/" + f.name, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    say("host " + n.host + ": cannot write its report part " + f.name + " into " + dir +
        " (--report-dir)");
    return;
  }
  report_files_.push_back(f.name);
}

void Coordinator::start_status_socket() {
  try {
    job_dir_ = std::make_unique<JobDir>();
    status_ = std::make_unique<StatusSocket>(job_dir_->path());
    status_wait_ = std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(status_->fd()));
  } catch (const std::exception& e) {  // the job runs anyway, without `sparkrun status` here
    log::write(log::Level::warn, "launch", std::string("no status socket: ") + e.what());
    status_.reset();
    return;
  }
  wait_status_request();
}

void Coordinator::wait_status_request() {
  status_wait_->async_wait(asio::posix::stream_descriptor::wait_read,
                           [this](const boost::system::error_code& ec) {
                             if (ec) return;
                             on_status_request();
                             wait_status_request();
                           });
}

void Coordinator::on_status_request() {
  auto req = status_->accept_request();
  if (!req) return;
  if (req->what != "status") {
    StatusSocket::reply(*req, nlohmann::json{{"error",
                                              "the launcher gathers status only: run sparkrun "
                                              "status --" +
                                                  req->what + " on each host"}}
                                      .dump() +
                                  "\n");
    return;
  }
  const std::uint64_t id = gather("status");
  status_gathers_[id].req = std::move(*req);
  if (status_gathers_[id].asked == 0) answer_status(id);
}

std::uint64_t Coordinator::gather(const std::string& what) {
  const std::uint64_t id = ++next_status_id_;
  StatusGather& g = status_gathers_[id];
  g.what = what;
  const std::string payload = ctl::encode(ctl::StatusAsk{id, what});
  for (std::uint32_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].authenticated && !nodes_[i].done && !nodes_[i].lost &&
        server_->send(i, ctl::MsgType::kStatusAsk, payload))
      ++g.asked;
  g.timer = std::make_unique<asio::steady_timer>(io_, kStatusGather);
  g.timer->async_wait([this, id](const boost::system::error_code& ec) {
    if (!ec) answer_status(id);
  });
  return id;
}

void Coordinator::start_metrics_server() {
  // Asked for: a port that cannot be had stops the launch (as on one host).
  metrics_ = std::make_unique<MetricsServer>(*spec_.metrics);
  metrics_wait_ = std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(metrics_->fd()));
  wait_metrics_request();
}

void Coordinator::wait_metrics_request() {
  metrics_wait_->async_wait(asio::posix::stream_descriptor::wait_read,
                            [this](const boost::system::error_code& ec) {
                              if (ec) return;
                              on_metrics_request();
                              wait_metrics_request();
                            });
}

void Coordinator::on_metrics_request() {
  net::Fd conn = metrics_->accept_request();
  if (!conn) return;
  const std::uint64_t id = gather("metrics");
  status_gathers_[id].http = std::move(conn);
  if (status_gathers_[id].asked == 0) answer_status(id);
}

void Coordinator::answer_status(std::uint64_t id) {
  auto it = status_gathers_.find(id);
  if (it == status_gathers_.end()) return;
  StatusGather& g = it->second;
  if (g.what == "metrics") {
    std::vector<std::string> texts;
    for (const auto& [node, text] : g.replies)
      if (!text.empty() && text.front() == '#') texts.push_back(text);  // not an error's JSON
    MetricsServer::answer(g.http, merge_openmetrics(spec_.job_id, texts, code_ ? 1 : 0));
    status_gathers_.erase(it);
    return;
  }
  nlohmann::json j = nlohmann::json::object();
  j["job"] = spec_.job_id;
  j["launcher_pid"] = ::getpid();
  j["size"] = spec_.plan.size;
  j["gathered"] = true;  // every host's rows (status_command prefers this answer)
  j["ranks"] = nlohmann::json::array();
  j["missing_hosts"] = nlohmann::json::array();
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    const auto r = g.replies.find(i);
    std::string why = "no answer within " + std::to_string(kStatusGather.count()) + " ms";
    if (nodes_[i].done) why = "its ranks ended";
    if (nodes_[i].lost) why = "its node daemon is lost";
    if (r != g.replies.end()) {
      const nlohmann::json part = nlohmann::json::parse(r->second, nullptr, false);
      if (part.is_object() && part.contains("ranks")) {
        for (const auto& row : part["ranks"]) j["ranks"].push_back(row);
        continue;
      }
      why = part.is_object() ? part.value("error", "a bad answer") : "a bad answer";
    }
    j["missing_hosts"].push_back({{"host", nodes_[i].host}, {"why", why}});
  }
  std::sort(j["ranks"].begin(), j["ranks"].end(),
            [](const nlohmann::json& a, const nlohmann::json& b) {
              return a.value("rank", 0) < b.value("rank", 0);
            });
  StatusSocket::reply(g.req, j.dump() + "\n");
  status_gathers_.erase(it);
}

void Coordinator::fail(int code, const std::string& line, bool print) {
  if (print) say(line);
  if (!code_ && spec_.failed) spec_.failed(code, line);
  if (!code_ && code == kExitTimeout) timed_out_ = true;  // --timeout
  if (!code_) code_ = code;
  begin_abort(false);
}

void Coordinator::begin_abort(bool now) {
  if (aborting_ && (!now || kill_now_sent_)) return;
  const bool first = !aborting_;
  aborting_ = true;
  if (now) kill_now_sent_ = true;
  trace(std::string("group abort on every host") + (now ? " (SIGKILL now)" : ""));
  const std::string payload = ctl::encode(ctl::Abort{now, !code_       ? "stopped"
                                                          : timed_out_ ? ctl::kAbortTimeout
                                                                       : "job failed"});
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].done && !nodes_[i].lost) server_->send(i, ctl::MsgType::kAbort, payload);
  }
  if (!first) return;
  connect_timer_.cancel();
  // Daemons collect their ranks' stacks when the job timed out (at most kStackBudget), stop
  // them (SIGTERM, grace, SIGKILL) and send their report parts; after that and a margin,
  // whatever is still running is killed from here. Without the stack step's time a daemon
  // still collecting stacks under load was killed before it sent its part.
  const auto limit =
      std::chrono::milliseconds(static_cast<long>(spec_.kill_grace_s * 1000)) + kStackBudget + 5s;
  finish_timer_.expires_after(limit);
  finish_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
      Node& n = nodes_[i];
      if (!n.done && !n.lost)
        say("host " + n.host + ": the node daemon did not stop in time; killing it");
      n.lost = n.lost || !n.done;
      if (n.agent > 0 && !n.agent_ended) ::kill(-n.agent, SIGKILL);
      server_->close(i);
    }
    // Output pipes may be held by stray processes: stop waiting for them shortly.
    finish_timer_.expires_after(1s);
    finish_timer_.async_wait([this](const boost::system::error_code& e) {
      if (!e) io_.stop();
    });
  });
}

void Coordinator::check_finished() {
  for (const auto& n : nodes_) {
    if (!(n.done || n.lost) || !n.agent_ended || !n.out.eof || !n.err.eof) return;
  }
  trace("every node finished");
  io_.stop();
}

void Coordinator::read_stream(std::uint32_t i, Stream& s) {
  s.fd->async_read_some(
      asio::buffer(s.buf), [this, i, &s](const boost::system::error_code& ec, std::size_t n) {
        if (!ec) {
          s.pending.append(s.buf.data(), n);
          const size_t last = s.pending.rfind('\n');
          if (last != std::string::npos) {
            write_all(s.target, std::string_view(s.pending).substr(0, last + 1));
            s.pending.erase(0, last + 1);
          }
          if (s.pending.size() > 1 << 20) {  // a huge line without newline: pass it on
            write_all(s.target, s.pending);
            s.pending.clear();
          }
          return read_stream(i, s);
        }
        if (ec == asio::error::operation_aborted) return;
        if (!s.pending.empty()) write_all(s.target, s.pending + "\n");
        s.pending.clear();
        s.eof = true;
        boost::system::error_code ignore;
        s.fd->close(ignore);
        check_finished();
      });
}

void Coordinator::start_agent(std::uint32_t i, const std::string& secret_hex) {
  Node& n = nodes_[i];
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  SpawnRequest req;
  const char* path_env = std::getenv("PATH");
  auto path = resolve_program(n.command.front(), path_env ? path_env : "");
  if (!path) {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    fail(kExitCannotStart,
         "host " + n.host + ": cannot start the launch agent: " + n.command.front() +
             ": command not found in PATH (see --launch-agent)",
         true);
    n.lost = true;
    return;
  }
  req.path = *path;
  req.argv = n.command;
  for (char** e = environ; e && *e; ++e) req.envp.emplace_back(*e);
  req.stdin_fd = in[0];
  req.stdout_fd = out[1];
  req.stderr_fd = err[1];
  StartedChild child = start_child(req);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  n.agent = child.pid;
  n.agent_ended = false;
  trace("host " + n.host + ": node daemon starting (pid " + std::to_string(child.pid) +
        "): " + join(n.command));
  // The secret: one line on the agent's stdin (ssh forwards it to the daemon's stdin).
  // A pipe holds far more than 65 bytes, so this never blocks.
  const std::string line = secret_hex + "\n";
  ssize_t w = ::write(in[1], line.data(), line.size());
  (void)w;
  ::close(in[1]);
  if (auto failure = await_exec(child, req.path)) {
    n.lost = true;
    fail(kExitCannotStart, "host " + n.host + ": cannot start the launch agent: " + *failure, true);
  }
  for (auto [s, fd, target] :
       {std::tuple{&n.out, out[0], STDOUT_FILENO}, std::tuple{&n.err, err[0], STDERR_FILENO}}) {
    s->fd = std::make_unique<asio::posix::stream_descriptor>(io_, fd);
    s->target = target;
    s->eof = false;
    read_stream(i, *s);
  }
}

void Coordinator::reap() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    for (auto& n : nodes_) {
      if (n.agent != pid || n.agent_ended) continue;
      n.agent_ended = true;
      n.agent_status = status;
      trace("host " + n.host + ": launch agent ended (" + describe_status(status) + ")");
      if (n.done || n.lost) break;
      if (!n.authenticated) {
        n.lost = true;
        fail(1,
             "host " + n.host + ": the launch agent exited (" + describe_status(status) +
                 ") before the node daemon connected; command: " + join(n.command),
             true);
        break;
      }
      // The daemon sends its last frame (kDone) and exits: SIGCHLD and that frame reach this
      // loop in either order (seen under load: "the node daemon exited (status 0) before its
      // ranks ended" at the end of a clean job). Its control link ends with it: the frame or
      // the link's end (on_lost) comes next; the timer covers an agent (ssh) that ended while
      // its daemon's link stays up.
      agent_timer_.expires_after(1s);
      agent_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        for (auto& m : nodes_)
          if (m.agent_ended && m.authenticated && !m.done && !m.lost) agent_exited_early(m);
        check_finished();
      });
      break;
    }
  }
  check_finished();
}

void Coordinator::read_signals() {
  sig_.async_read_some(
      asio::buffer(&si_, sizeof si_), [this](const boost::system::error_code& ec, std::size_t n) {
        if (ec) return;
        if (n == sizeof si_) {
          const int signo = static_cast<int>(si_.ssi_signo);
          if (signo == SIGCHLD) {
            reap();
          } else if (signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT) {
            if (aborting_) {
              begin_abort(true);  // asked twice: no more grace
            } else {
              if (tracker_.interrupted(signo)) say(tracker_.failure_line());
              fail(tracker_.exit_code(), "", false);
            }
          }
        }
        read_signals();
      });
}

void Coordinator::on_authenticated(std::uint32_t i) {
  Node& n = nodes_[i];
  n.authenticated = true;
  ++authenticated_;
  trace("host " + n.host + ": node daemon connected and authenticated");
  if (aborting_) {
    n.lost = true;  // too late to run anything: the daemon exits when we close
    server_->close(i);
    check_finished();
    return;
  }
  ctl::PlanMsg p;
  p.job_id = spec_.job_id;
  p.node = i;
  p.plan = spec_.plan;
  p.argv = spec_.argv;
  p.exports = exports_;
  p.working_dir = spec_.working_dir;
  p.tag_output = spec_.format.tag;
  p.timestamp_output = spec_.format.timestamp;
  p.verbose = spec_.verbose;
  p.output_dir = spec_.output_dir;
  p.kill_grace_ms = static_cast<std::uint32_t>(spec_.kill_grace_s * 1000);
  p.heartbeat_ms = static_cast<std::uint32_t>(kHeartbeat.count());
  p.link_timeout_ms = static_cast<std::uint32_t>(kLinkTimeout.count());
  p.bind_to = spec_.bind_to;
  p.map_by = spec_.map_by;
  p.report_bindings = spec_.report_bindings;
  p.nccl_env = spec_.nccl_env;
  server_->send(i, ctl::MsgType::kPlan, ctl::encode(p));
  if (authenticated_ == nodes_.size()) {
    connect_timer_.cancel();
    trace("every node daemon connected");
  }
}

void Coordinator::on_message(std::uint32_t i, const ctl::Frame& f) {
  Node& n = nodes_[i];
  switch (f.type) {
    case ctl::MsgType::kStarted:
      trace("host " + n.host + ": starting its ranks");
      return;
    case ctl::MsgType::kReportFile:
      write_report_file(n, ctl::decode_report_file(f.payload));
      return;
    case ctl::MsgType::kStatusReply: {
      ctl::StatusReply r = ctl::decode_status_reply(f.payload);
      auto it = status_gathers_.find(r.id);
      if (it == status_gathers_.end()) return;  // answered already (the gather timed out)
      it->second.replies[i] = std::move(r.json);
      if (it->second.replies.size() >= it->second.asked) answer_status(r.id);
      return;
    }
    case ctl::MsgType::kFenceUp: {
      ctl::Fence fe = ctl::decode_fence(f.payload);
      auto& slot = fences_[fe.seq];
      slot.resize(nodes_.size());
      if (slot[i]) throw ctl::ProtocolError("two contributions to fence " + std::to_string(fe.seq));
      slot[i] = std::move(fe.data);
      for (const auto& c : slot) {
        if (!c) return;
      }
      // Every node is in: the blob is the nodes' contributions one after another, which
      // is how PMIx servers expect a host's collective data.
      std::string all;
      for (const auto& c : slot) all += *c;
      fences_.erase(fe.seq);
      trace("fence " + std::to_string(fe.seq) + " complete (" + std::to_string(all.size()) +
            " bytes)");
      const std::string payload = ctl::encode(ctl::Fence{fe.seq, std::move(all)});
      for (std::uint32_t k = 0; k < nodes_.size(); ++k)
        server_->send(k, ctl::MsgType::kFenceDown, payload);
      return;
    }
    case ctl::MsgType::kFailed: {
      ctl::Failed fl = ctl::decode_failed(f.payload);
      trace("host " + n.host + ": failed (exit " + std::to_string(fl.code) + ")");
      if (!code_) timed_out_ = fl.timed_out;
      fail(fl.code, fl.line, false);  // the daemon printed the line already
      return;
    }
    case ctl::MsgType::kDone: {
      ctl::Done d = ctl::decode_done(f.payload);
      n.done = true;
      trace("host " + n.host + ": every rank ended (exit " + std::to_string(d.code) + ")");
      if (d.code != 0 && !code_) fail(d.code, "", false);
      server_->close(i);
      check_finished();
      return;
    }
    default:
      throw ctl::ProtocolError("unexpected " + ctl::type_name(static_cast<std::uint8_t>(f.type)) +
                               " from a daemon");
  }
}

void Coordinator::agent_exited_early(Node& n) {
  n.lost = true;
  fail(1,
       "host " + n.host + ": the node daemon exited (" + describe_status(n.agent_status) +
           ") before its ranks ended; stopping every rank",
       true);
}

void Coordinator::on_lost(std::uint32_t i, const std::string& reason) {
  Node& n = nodes_[i];
  if (n.done || n.lost) return;
  if (n.agent_ended && n.authenticated) {  // its link ended after the agent: say how it ended
    agent_exited_early(n);
    check_finished();
    return;
  }
  n.lost = true;
  fail(1, "host " + n.host + ": lost the node daemon (" + reason + "); stopping every rank", true);
  if (n.agent > 0 && !n.agent_ended) ::kill(-n.agent, SIGTERM);
  check_finished();
}

int Coordinator::run() {
  const ctl::Secret secret = ctl::random_secret();
  std::vector<std::string> hosts;
  std::vector<bool> local;
  for (const auto& n : spec_.plan.nodes) {
    // A host whose name does not resolve may have a known address (SLURM's NodeAddr).
    const auto addr = spec_.route_to.find(n.host);
    hosts.push_back(addr != spec_.route_to.end() ? addr->second : n.host);
    local.push_back(n.local);
  }
  const ControlAddresses addr = choose_control_addresses(spec_.control_net, hosts, local);
  {
    // torchrun's MASTER_ADDR/MASTER_PORT (docs/python.md): rank 0's host on the control
    // network; when that is this machine, the address the daemons reach it at. The port is
    // one free here (on a remote rank-0 host it is only likely to be free).
    const auto k = static_cast<std::size_t>(spec_.plan.ranks.at(0).node);
    std::string master = hosts[k];
    if (local[k])
      for (std::size_t j = 0; j < hosts.size(); ++j)
        if (!local[j]) {
          master = addr.connect[j];
          break;
        }
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    exports_ = spec_.exports;
    for (auto& v : torchrun_master_env(master, pick_free_port(), env, spec_.exports))
      exports_.push_back(std::move(v));
  }

  ctl::ControlServer::Callbacks cb;
  cb.authenticated = [this](std::uint32_t i) { on_authenticated(i); };
  cb.message = [this](std::uint32_t i, const ctl::Frame& f) { on_message(i, f); };
  cb.lost = [this](std::uint32_t i, const std::string& why) { on_lost(i, why); };
  cb.log = [](const std::string& line) { say(line); };
  ctl::ControlServer::Settings st;
  st.heartbeat = kHeartbeat;
  st.link_timeout = kLinkTimeout;
  server_ = std::make_unique<ctl::ControlServer>(
      io_, asio::ip::tcp::endpoint(asio::ip::make_address(addr.listen), 0), secret, spec_.job_id,
      static_cast<std::uint32_t>(spec_.plan.nodes.size()), cb, st);
  const auto port = server_->local_endpoint().port();
  trace("control plane listening on " + addr.listen + ":" + std::to_string(port));
  start_status_socket();
  if (spec_.metrics) start_metrics_server();

  // Signals arrive through a signalfd (main() blocked them before any thread existed).
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
  int sfd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
  sig_.assign(sfd);
  read_signals();

  const std::string exe = self_exe();
  const std::string agent =
      spec_.launch_agent.empty() ? std::string(kDefaultLaunchAgent) : spec_.launch_agent;
  const std::string secret_hex = ctl::to_hex(secret);
  nodes_.resize(spec_.plan.nodes.size());
  for (std::uint32_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    n.host = spec_.plan.nodes[i].host;
    n.local = spec_.plan.nodes[i].local;
    std::vector<std::string> daemon = {exe,         "--daemon",
                                       "--connect", addr.connect[i] + ":" + std::to_string(port),
                                       "--node",    std::to_string(i),
                                       "--job",     spec_.job_id,
                                       "--host",    n.host};
    n.command = n.local ? daemon : agent_argv(agent, n.host, daemon);
  }
  for (std::uint32_t i = 0; i < nodes_.size() && !aborting_; ++i) start_agent(i, secret_hex);
  for (auto& n : nodes_) {
    if (n.agent < 0) n.lost = true;  // not started: an earlier host failed already
  }
  trace("launch agents started");

  connect_timer_.expires_after(kConnectTimeout);
  connect_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    for (auto& n : nodes_) {
      if (!n.authenticated && !n.lost) {
        n.lost = true;
        fail(1,
             "host " + n.host + ": no node daemon connected within " +
                 std::to_string(
                     std::chrono::duration_cast<std::chrono::seconds>(kConnectTimeout).count()) +
                 " s; command: " + join(n.command),
             true);
        if (n.agent > 0 && !n.agent_ended) ::kill(-n.agent, SIGKILL);
      }
    }
  });
  if (spec_.timeout_s) {
    timeout_timer_.expires_after(
        std::chrono::microseconds(static_cast<long>(*spec_.timeout_s * 1e6)));
    timeout_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (ec || aborting_) return;
      if (tracker_.timed_out(*spec_.timeout_s)) say(tracker_.failure_line());
      fail(kExitTimeout, "", false);
    });
  }
  check_finished();
  io_.run();
  server_->stop();
  status_wait_.reset();  // before status_ and the job dir
  metrics_wait_.reset();
  if (!report_files_.empty()) {
    std::string list;
    for (const auto& f : report_files_) list += (list.empty() ? "" : ", ") + f;
    say("report: " + report_dir() + " (every host's part: " + list + ")");
  }
  return code_.value_or(0);
}

}  // namespace

int run_multihost(const MultiHostSpec& spec) {
  Coordinator c(spec);
  return c.run();
}

}  // namespace spark::launch
