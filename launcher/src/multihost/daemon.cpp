#include "daemon.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "binding.hpp"
#include "control/client.hpp"
#include "control/messages.hpp"
#include "env_check.hpp"
#include "exit_rules.hpp"
#include "node_runner.hpp"
#include "options.hpp"
#include "remote_address.hpp"
#include "spawn.hpp"
#include "status_socket.hpp"
#include "stderr_output.hpp"
#include "usage_error.hpp"

extern char** environ;

namespace spark::launch {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace ctl = control;

// The secret arrives as one line of hex on stdin; stdin is /dev/null afterwards (the
// ranks never see the pipe).
ctl::Secret read_secret() {
  std::string line;
  char c;
  while (line.size() <= 2 * ctl::kSecretSize) {
    ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') break;
    line.push_back(c);
  }
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    ::dup2(null_fd, STDIN_FILENO);
    if (null_fd != STDIN_FILENO) ::close(null_fd);
  }
  return ctl::secret_from_hex(line);
}

// State shared by the main thread (node runner), the link thread and PMIx's thread.
class Link {
 public:
  Link(ctl::ControlClient& client, std::string host, std::chrono::milliseconds heartbeat,
       std::chrono::milliseconds timeout)
      : client_(client), host_(std::move(host)), heartbeat_(heartbeat), timeout_(timeout) {}

  void send(ctl::MsgType type, const std::string& payload) {
    try {
      client_.send(type, payload);
    } catch (const ctl::LinkError&) {
      // The link thread notices the loss too and acts on it.
    }
  }

  void fence(std::string data, std::function<void(std::string)> complete) {
    std::uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(m_);
      seq = next_seq_++;
      fences_[seq] = std::move(complete);
    }
    send(ctl::MsgType::kFenceUp, ctl::encode(ctl::Fence{seq, std::move(data)}));
  }

  void attach(std::function<void(bool, bool)> stop) {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = std::move(stop);
    if (stop_ && pending_stop_) stop_(*pending_stop_, pending_stuck_);
  }

  // now: SIGKILL at once; stuck: the job failed by a timeout (the ranks' stacks are wanted).
  void stop(bool now, bool stuck = false) {
    std::lock_guard<std::mutex> lock(m_);
    if (stop_) {
      stop_(now, stuck);
    } else {
      pending_stop_ = pending_stop_.value_or(false) || now;
      pending_stuck_ = pending_stuck_ || stuck;
    }
  }

  // The link thread: heartbeats out, orders in.
  void run() {
    auto last_rx = Clock::now();
    auto last_tx = Clock::now();
    for (;;) {
      std::optional<ctl::Frame> f;
      // Wake at least every heartbeat period: ours go out on time whatever comes in.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(last_tx + heartbeat_ -
                                                                              Clock::now());
      try {
        f = client_.receive(std::max(left, std::chrono::milliseconds(1)));
      } catch (const ctl::LinkError& e) {
        return lost(e.what());
      }
      if (finished()) return;
      const auto now = Clock::now();
      if (now - last_tx >= heartbeat_) {
        send(ctl::MsgType::kHeartbeat, {});
        last_tx = now;
      }
      if (!f) {
        if (now - last_rx > timeout_) {
          return lost("no message from the launcher for " + std::to_string(timeout_.count()) +
                      " ms");
        }
        continue;
      }
      last_rx = now;
      try {
        switch (f->type) {
          case ctl::MsgType::kHeartbeat:
            break;
          case ctl::MsgType::kAbort: {
            const ctl::Abort a = ctl::decode_abort(f->payload);
            stop(a.now, a.reason == ctl::kAbortTimeout);
            break;
          }
          case ctl::MsgType::kStatusAsk:
            answer_status(ctl::decode_status_ask(f->payload));
            break;
          case ctl::MsgType::kFenceDown: {
            ctl::Fence fe = ctl::decode_fence(f->payload);
            std::function<void(std::string)> complete;
            {
              std::lock_guard<std::mutex> lock(m_);
              auto it = fences_.find(fe.seq);
              if (it == fences_.end())
                throw ctl::ProtocolError("fence-down for unknown fence " + std::to_string(fe.seq));
              complete = std::move(it->second);
              fences_.erase(it);
            }
            if (complete) complete(std::move(fe.data));
            break;
          }
          default:
            throw ctl::ProtocolError("unexpected " +
                                     ctl::type_name(static_cast<std::uint8_t>(f->type)));
        }
      } catch (const ctl::ProtocolError& e) {
        return lost(std::string("bad message from the launcher: ") + e.what());
      }
    }
  }

  // `sparkrun status` on the launch host: this node runner's own answer, through its status
  // socket (the one wire rule for it), on this thread: at most 2 s without heartbeats, well
  // inside the link timeout.
  void answer_status(const ctl::StatusAsk& ask) {
    std::string json;
    try {
      if (ask.what != "status" && ask.what != "metrics")
        throw std::runtime_error("the launcher may ask for status or metrics only");
      for (const auto& job : local_jobs())
        if (job.pid == ::getpid()) json = ask_job(job.dir, ask.what, std::chrono::seconds(2));
      if (json.empty()) throw std::runtime_error("its ranks are not running (yet)");
    } catch (const std::exception& e) {
      json = nlohmann::json{{"host", host_}, {"error", e.what()}}.dump();
    }
    send(ctl::MsgType::kStatusReply, ctl::encode(ctl::StatusReply{ask.id, std::move(json)}));
  }

  bool was_lost() {
    std::lock_guard<std::mutex> lock(m_);
    return lost_;
  }

  void finish() {
    std::lock_guard<std::mutex> lock(m_);
    finished_ = true;
    cv_.notify_all();
  }

 private:
  bool finished() {
    std::lock_guard<std::mutex> lock(m_);
    return finished_;
  }

  // The launcher is gone (killed, host unreachable): nobody will collect our ranks'
  // results, so they die now, and so do we, within a second.
  void lost(const std::string& why) {
    if (finished()) return;
    say("control link to the launcher lost (" + why + "); killing local ranks");
    stop(true);
    std::unique_lock<std::mutex> lock(m_);
    lost_ = true;
    if (!cv_.wait_for(lock, 800ms, [&] { return finished_; })) {
      // The node runner did not wind down in time: leave at once. Our orphan watcher
      // SIGKILLs every rank's process group when we exit without disarming it.
      std::_Exit(1);
    }
  }

  ctl::ControlClient& client_;
  std::string host_;
  std::chrono::milliseconds heartbeat_, timeout_;
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void(bool, bool)> stop_;
  std::optional<bool> pending_stop_;
  bool pending_stuck_ = false;
  std::map<std::uint64_t, std::function<void(std::string)>> fences_;
  std::uint64_t next_seq_ = 0;
  bool finished_ = false;
  bool lost_ = false;
};

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

// This host's part of a failed job's report (the node runner wrote it), for the launch
// host's report folder: sent before done, so the launcher has it when it exits.
void send_report_part(Link& link, const NodeRunSpec& spec, const std::string& host) {
  std::string dir = spec.report_dir;
  if (dir.empty()) {  // the node runner's default (node_runner.hpp)
    const char* parent = std::getenv("SPARK_REPORT_DIR");
    std::error_code ec;
    dir = (parent && *parent ? std::string(parent) : std::filesystem::current_path(ec).string()) +
          "/report." + spec.job_id;
  }
  for (const std::string name : {"flight." + host + ".json", "stacks." + host + ".txt"}) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    link.send(ctl::MsgType::kReportFile, ctl::encode(ctl::ReportFile{name, text.str()}));
  }
}

}  // namespace

int daemon_main(int argc, char** argv) {
  DaemonOptions args;
  ctl::Secret secret{};
  try {
    args = parse_daemon_options(std::vector<std::string>(argv + 2, argv + argc));
    secret = read_secret();
  } catch (const std::exception& e) {
    say(std::string("--daemon: ") + e.what());
    return kExitUsage;
  }
  if (args.host.empty()) args.host = "node " + std::to_string(args.node);
  set_line_host(args.host);  // every line from here on names this host (stderr_output.hpp)

  std::unique_ptr<ctl::ControlClient> client;
  ctl::PlanMsg plan;
  try {
    client = std::make_unique<ctl::ControlClient>(args.address, args.port, 15s);
    client->handshake(secret, args.job, args.node, 15s);
    auto f = client->receive(60s);
    if (!f) throw ctl::LinkError("no plan from the launcher within 60 s");
    if (f->type != ctl::MsgType::kPlan) {
      throw ctl::LinkError("expected the plan, got " +
                           ctl::type_name(static_cast<std::uint8_t>(f->type)));
    }
    plan = ctl::decode_plan(f->payload);
    if (plan.job_id != args.job || plan.node != args.node)
      throw ctl::LinkError("the plan is for another job or node");
  } catch (const std::exception& e) {
    say(std::string("node daemon: ") + e.what());
    return 1;
  }
  std::fill(secret.begin(), secret.end(), 0);

  const NodePlan& node = plan.plan.nodes[plan.node];
  Link link(*client, node.host, std::chrono::milliseconds(plan.heartbeat_ms),
            std::chrono::milliseconds(plan.link_timeout_ms));

  NodeRunSpec spec;
  spec.job_id = plan.job_id;
  spec.plan = plan.plan;
  spec.node = static_cast<int>(plan.node);
  spec.argv = plan.argv;
  spec.base_env = current_environment();
  spec.exports = plan.exports;
  spec.working_dir = plan.working_dir;
  start_launch_log(spec.base_env, spec.exports, node.host, "daemon");  // SPARK_LOG (launch)
  spec.format = {plan.tag_output, plan.timestamp_output};
  spec.output_dir = plan.output_dir;
  // This host's part of a failed job's report (observability.md): in SPARK_REPORT_DIR as the
  // launcher forwards it (or this host's own), else in the job's working directory.
  spec.write_report = true;
  spec.report_per_host = true;
  std::string report_base = plan.working_dir;
  if (const char* own = std::getenv("SPARK_REPORT_DIR"); own && *own) report_base = own;
  for (const auto& [name, value] : plan.exports)
    if (name == "SPARK_REPORT_DIR" && !value.empty()) report_base = value;
  if (!report_base.empty()) spec.report_dir = report_base + "/report." + plan.job_id;
  spec.kill_grace_s = plan.kill_grace_ms / 1000.0;
  spec.verbose = plan.verbose;
  spec.report_wireup = plan.verbose || plan.report_bindings;
  spec.link.fence = [&link](std::string data, std::function<void(std::string)> complete) {
    link.fence(std::move(data), std::move(complete));
  };
  spec.link.failed = [&link](int code, const std::string& line, bool timed_out) {
    link.send(ctl::MsgType::kFailed, ctl::encode(ctl::Failed{code, host_line(line), timed_out}));
  };
  spec.link.attach = [&link](std::function<void(bool, bool)> stop) {
    link.attach(std::move(stop));
  };

  if (!spec.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(spec.output_dir, ec);  // errors show up per rank
  }
  // The program is looked up here, with this host's PATH (like mpirun's daemons).
  const char* path_env = std::getenv("PATH");
  auto program = resolve_program(plan.argv.front(), path_env ? path_env : "");
  int code = 0;
  std::thread link_thread([&link] { link.run(); });
  // The job's directory must exist here too: checked before any rank starts, so a host
  // without it fails the job at once (the ranks' chdir would fail one by one).
  std::error_code wdir_error;
  const bool wdir_missing =
      !spec.working_dir.empty() && !std::filesystem::is_directory(spec.working_dir, wdir_error);
  const int first = node.ranks.empty() ? 0 : node.ranks.front();
  if (wdir_missing || !program) {
    ExitTracker tracker;
    if (wdir_missing) {
      tracker.start_failed(first,
                           "the working directory " + spec.working_dir + " does not exist there" +
                               (wdir_error && wdir_error != std::errc::no_such_file_or_directory
                                    ? " (" + wdir_error.message() + ")"
                                    : "") +
                               "; create it on " + node.host +
                               ", or give one that exists on every host with --wdir DIR");
    } else {
      tracker.start_failed(first, plan.argv.front() + ": command not found in PATH");
    }
    say(tracker.failure_line());
    link.send(ctl::MsgType::kFailed,
              ctl::encode(ctl::Failed{kExitCannotStart, host_line(tracker.failure_line())}));
    code = kExitCannotStart;
  } else {
    spec.program_path = *program;
    link.send(ctl::MsgType::kStarted, {});
    try {
      // This node's cores and lanes, from its own topology (docs/binding.md); a request it
      // cannot meet is this node's failure, reported with its host below.
      // --nccl-env: NCCL/Gloo sockets on the interface this daemon reaches the launcher over.
      spec.control_interface = interface_of_address(client->local_address());
      plan_node_binding(
          BindingOptions{plan.bind_to, plan.map_by, "", plan.report_bindings, plan.nccl_env}, spec);
      code = run_node(spec);
    } catch (const std::exception& e) {
      say(e.what());
      link.send(ctl::MsgType::kFailed, ctl::encode(ctl::Failed{1, host_line(e.what())}));
      code = 1;
    }
  }
  if (link.was_lost() && code == 0) code = 1;  // our ranks were killed, not finished
  send_report_part(link, spec, node.host);     // when its runner wrote one
  link.finish();
  link.send(ctl::MsgType::kDone, ctl::encode(ctl::Done{code}));
  client->shutdown();
  link_thread.join();
  return code;
}

}  // namespace spark::launch
