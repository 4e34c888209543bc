// The control plane's messages and their payload encodings (see wire.hpp for framing).
// decode_* functions throw ProtocolError on any inconsistency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/auth.hpp"
#include "control/wire.hpp"
#include "job_plan.hpp"
#include "rank_env.hpp"

namespace spark::launch::control {

struct Challenge {
  Nonce nonce{};
};
struct Hello {
  std::uint32_t node = 0;
  Nonce nonce{};
  Mac mac{};
};
struct Welcome {
  Mac mac{};
};

/// What one daemon runs: the whole job plan (PMIx needs every node's ranks) and its node.
struct PlanMsg {
  std::string job_id;
  std::uint32_t node = 0;
  JobPlan plan;
  std::vector<std::string> argv;  // argv[0] as typed; resolved with the daemon's PATH
  std::vector<EnvVar> exports;    // forwarded_env.hpp's variables, resolved on the launcher
  std::string working_dir;        // the ranks' directory (--wdir or the launcher's); "": stay
  bool tag_output = false;
  bool timestamp_output = false;
  bool verbose = false;
  std::string output_dir;
  std::uint32_t kill_grace_ms = 2000;
  std::uint32_t heartbeat_ms = 1000;
  std::uint32_t link_timeout_ms = 10000;  // silence after which the link counts as lost
  // Binding (docs/binding.md): each daemon plans for its own machine.
  std::string bind_to;  // "" = the default
  std::string map_by;   // "" = slot
  bool report_bindings = false;
  bool nccl_env = false;  // --nccl-env: NCCL / Gloo variables from the daemon's own machine
};

struct Fence {
  std::uint64_t seq = 0;
  std::string data;
};
struct Failed {
  std::int32_t code = 1;
  std::string line;
  bool timed_out = false;  // a rank's fail-stop timeout: every host's stacks are wanted
};
struct Done {
  std::int32_t code = 0;
};
struct Abort {
  bool now = false;    // SIGKILL at once instead of SIGTERM + grace
  std::string reason;  // "job failed", kAbortTimeout, "stopped"
};
/// Abort's reason when the job failed by a rank's fail-stop timeout or --timeout: every
/// host's report part then holds its ranks' stacks.
inline constexpr const char* kAbortTimeout = "timeout";
/// `sparkrun status` on the launch host: the request ("status") for every daemon's node
/// runner (status_socket.hpp), and a daemon's answer, its runner's JSON as is.
struct StatusAsk {
  std::uint64_t id = 0;
  std::string what;
};
struct StatusReply {
  std::uint64_t id = 0;
  std::string json;
};
/// A file of a daemon's part of a failed job's report (flight.HOST.json, stacks.HOST.txt),
/// sent before its done: the launcher writes it into the launch host's report folder. The
/// name is a plain file name (decode checks: no path).
struct ReportFile {
  std::string name;
  std::string content;
};

std::string encode(const Challenge& m);
std::string encode(const Hello& m);
std::string encode(const Welcome& m);
std::string encode(const PlanMsg& m);
std::string encode(const Fence& m);
std::string encode(const Failed& m);
std::string encode(const Done& m);
std::string encode(const Abort& m);
std::string encode(const StatusAsk& m);
std::string encode(const StatusReply& m);
std::string encode(const ReportFile& m);

Challenge decode_challenge(std::string_view payload);
Hello decode_hello(std::string_view payload);
Welcome decode_welcome(std::string_view payload);
PlanMsg decode_plan(std::string_view payload);
Fence decode_fence(std::string_view payload);
Failed decode_failed(std::string_view payload);
Done decode_done(std::string_view payload);
Abort decode_abort(std::string_view payload);
StatusAsk decode_status_ask(std::string_view payload);
StatusReply decode_status_reply(std::string_view payload);
ReportFile decode_report_file(std::string_view payload);

}  // namespace spark::launch::control
