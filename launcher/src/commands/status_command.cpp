#include "status_command.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "options.hpp"
#include "status_socket.hpp"
#include "strict_parse.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

using nlohmann::json;

constexpr const char* kStatusUsage =
    R"(Usage: sparkrun status [JOB] [--list] [--json] [--watch [SECONDS]] [--stacks]

Shows a running job of yours on this machine, one row per rank: host, pid, state (running,
waiting, stopped, exited), the operation it is in (communicator, seq, bytes) and for how long,
the peer and lane it waits on, operations completed and its rate since the previous look;
under each rank its lanes to its peers: bytes sent, rate, the share of the time the lane was
busy and the share its waits blocked on it. On the launch host of a multi-host job: every
host's ranks (gathered from the node daemons over the control plane); on another host of it:
that host's ranks.
Read from the ranks' flight recorders (SPARK_FLIGHT_RECORDER) through sparkrun's socket in
the job's directory; only the job's user can ask.

  JOB              the job id, sparkrun's pid, or its job directory (default: the only job)
  --list           the running jobs (job id, sparkrun's pid, ranks)
  --json           the answer as JSON, for scripts
  --watch [SECONDS]  ask again every SECONDS (default 1) until interrupted or the job ends
  --stacks         collect the thread stacks of this machine's ranks (eu-stack or gdb;
                   Python frames for ranks that imported libspark) into the job's report
                   folder; prints the file

Docs: docs/observability.md
)";

struct Found {
  LocalJob job;
  json hello;  // its status reply
};

std::vector<Found> ask_all() {
  std::vector<Found> out;
  for (const auto& j : local_jobs()) {
    try {
      out.push_back({j, json::parse(ask_job(j.dir, "status", std::chrono::seconds(5)))});
    } catch (const std::exception&) {  // ended between the listing and the question
    }
  }
  return out;
}

std::string fmt_seconds(const json& v) {
  if (!v.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.get<double>());
  return buf;
}

std::string fmt_rate(const json& row) {
  if (!row.contains("bytes_per_s")) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f op/s %.1f MB/s", row["ops_per_s"].get<double>(),
                row["bytes_per_s"].get<double>() / 1e6);
  return buf;
}

void print_table(const json& s) {
  std::printf("job %s (sparkrun pid %d, %d ranks)\n", s.value("job", "?").c_str(),
              s.value("launcher_pid", 0), s.value("size", 0));
  if (s.contains("missing_hosts"))
    for (const auto& m : s["missing_hosts"])
      std::printf("host %s: no rows (%s)\n", m.value("host", "?").c_str(),
                  m.value("why", "").c_str());
  std::printf("%-5s %-12s %-8s %-8s %-10s %-12s %-6s %-10s %-8s %-22s %-10s %s\n", "RANK", "HOST",
              "PID", "STATE", "COMM", "OP", "SEQ", "BYTES", "IN_OP_S", "WAITS_ON", "DONE", "RATE");
  for (const auto& row : s["ranks"]) {
    std::string comm = "-", op = "-", seq = "-", bytes = "-", in_op = "-", waits = "-";
    if (row.contains("current")) {
      const json& c = row["current"];
      comm = c.value("comm", "-");
      op = c.value("op", "-");
      if (c.value("state", "") != "running") op += "(" + c.value("state", "") + ")";
      seq = std::to_string(c.value("seq", 0));
      bytes = std::to_string(c.value("bytes", 0));
      if (c.value("state", "") == "running") in_op = fmt_seconds(c["start_s_ago"]);
      if (c.contains("wait") && c["wait"].value("waiting", false))
        waits = "rank " + std::to_string(c["wait"].value("peer", -1)) + " " +
                c["wait"].value("lane", "") + " " + fmt_seconds(c["wait"]["seconds"]) + "s";
    }
    std::printf(
        "%-5d %-12s %-8d %-8s %-10s %-12s %-6s %-10s %-8s %-22s %-10s %s\n", row.value("rank", -1),
        row.value("host", "").c_str(), row.value("pid", -1), row.value("state", "").c_str(),
        comm.c_str(), op.c_str(), seq.c_str(), bytes.c_str(), in_op.c_str(), waits.c_str(),
        row.contains("ops_completed") ? std::to_string(row["ops_completed"].get<long>()).c_str()
                                      : "-",
        fmt_rate(row).c_str());
    // Its lanes that carried something: bytes sent, rate and blocked share since the last look.
    if (!row.contains("lanes")) continue;
    for (const auto& l : row["lanes"]) {
      if (l.value("bytes_sent", std::uint64_t{0}) == 0 && l.value("blocked_s", 0.0) == 0) continue;
      char rate[96] = "-";
      if (l.contains("bytes_per_s"))
        std::snprintf(rate, sizeof rate, "%.1f MB/s, busy %.0f%%, waits blocked on it %.0f%%",
                      l["bytes_per_s"].get<double>() / 1e6,
                      std::min(100.0, 100 * l.value("busy_share", 0.0)),
                      std::min(100.0, 100 * l.value("blocked_share", 0.0)));
      std::printf("      lane %-16s to rank %-4d %12.1f MB sent  %s\n", l.value("lane", "").c_str(),
                  l.value("peer", -1),
                  static_cast<double>(l.value("bytes_sent", std::uint64_t{0})) / 1e6, rate);
    }
  }
}

}  // namespace

int status_main(int argc, char** argv) {
  CLI::App app{"sparkrun status", "sparkrun status"};
  app.set_help_flag();
  bool help = false, list = false, as_json = false, stacks = false;
  std::string job, watch_text;
  app.add_flag("-h,--help", help);
  app.add_flag("--list", list);
  app.add_flag("--json", as_json);
  app.add_flag("--stacks", stacks);
  auto* watch = app.add_option("--watch", watch_text)->expected(0, 1);
  app.add_option("job", job);
  double every = 1.0;
  try {
    parse_command_line(app, std::vector<std::string>(argv + 1, argv + argc));
    if (watch->count() > 0 && !watch_text.empty()) every = parse_seconds(watch_text, "--watch");
    if (every < 0.1) throw UsageError("--watch: at least 0.1 seconds");
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun status");
  }
  if (help) {
    std::fputs(kStatusUsage, stdout);
    return 0;
  }
  try {
    std::vector<Found> jobs = ask_all();
    if (list) {
      if (as_json) {
        json out = json::array();
        for (const auto& f : jobs)
          out.push_back({{"job", f.hello.value("job", "")},
                         {"launcher_pid", f.job.pid},
                         {"ranks", f.hello.value("size", 0)},
                         {"dir", f.job.dir}});
        std::printf("%s\n", out.dump(1).c_str());
      } else {
        std::printf("%-32s %-8s %-6s %s\n", "JOB", "PID", "RANKS", "DIR");
        for (const auto& f : jobs)
          std::printf("%-32s %-8d %-6d %s\n", f.hello.value("job", "").c_str(), f.job.pid,
                      f.hello.value("size", 0), f.job.dir.c_str());
      }
      return 0;
    }
    std::vector<const Found*> chosen;
    for (const auto& f : jobs)
      if (job.empty() || f.hello.value("job", "") == job || std::to_string(f.job.pid) == job ||
          f.job.dir == job)
        chosen.push_back(&f);
    if (chosen.empty()) {
      std::fprintf(stderr, "sparkrun status: %s\n",
                   job.empty() ? "no running job of yours on this machine"
                               : ("no running job " + job +
                                  " of yours on this machine (sparkrun "
                                  "status --list shows them)")
                                     .c_str());
      return 1;
    }
    // Several node runners of one job may run here (the node daemons of a job whose "hosts"
    // are containers or network namespaces of this machine): their rows together. The
    // launcher of a multi-host job answers with every host's rows ("gathered"): that answer
    // alone, for the status; the local runners for --stacks.
    std::vector<std::string> dirs;
    const Found* gathered = nullptr;
    for (const Found* f : chosen) {
      if (f->hello.value("job", "") != chosen.front()->hello.value("job", "")) {
        std::fprintf(stderr,
                     "sparkrun status: %zu jobs run here; name one (sparkrun status --list)\n",
                     chosen.size());
        return 2;
      }
      if (f->hello.value("gathered", false))
        gathered = f;
      else
        dirs.push_back(f->job.dir);
    }
    if (gathered && !stacks) dirs = {gathered->job.dir};
    if (dirs.empty()) {
      std::fprintf(stderr,
                   "sparkrun status: --stacks: no node of this job runs on this machine; run "
                   "sparkrun status --stacks on the hosts of its ranks\n");
      return 1;
    }
    if (stacks) {
      json all = json::array();
      for (const auto& dir : dirs) {
        const json r = json::parse(ask_job(dir, "stacks", std::chrono::seconds(30)));
        if (!as_json && !r.value("file", "").empty())
          std::printf("stacks: %s\n", r["file"].get<std::string>().c_str());
        else if (!as_json)
          std::fprintf(stderr, "sparkrun status: %s\n", r.value("error", "no stacks").c_str());
        all.push_back(r);
      }
      if (as_json) std::printf("%s\n", (dirs.size() == 1 ? all[0] : all).dump(1).c_str());
      for (const auto& r : all)
        if (r.value("file", "").empty()) return 1;
      return 0;
    }
    auto merged = [&dirs](json first) {
      for (std::size_t i = 1; i < dirs.size(); ++i) {
        const json more = json::parse(ask_job(dirs[i], "status", std::chrono::seconds(5)));
        for (const auto& row : more["ranks"]) first["ranks"].push_back(row);
      }
      std::sort(first["ranks"].begin(), first["ranks"].end(), [](const json& a, const json& b) {
        return a.value("rank", 0) < b.value("rank", 0);
      });
      return first;
    };
    const auto first = std::find_if(chosen.begin(), chosen.end(),
                                    [&](const Found* f) { return f->job.dir == dirs.front(); });
    json s = merged((*first)->hello);
    for (;;) {
      if (as_json) {
        std::printf("%s\n", s.dump(watch->count() > 0 ? -1 : 1).c_str());
      } else {
        if (watch->count() > 0 && ::isatty(STDOUT_FILENO)) std::fputs("\033[H\033[2J", stdout);
        print_table(s);
      }
      std::fflush(stdout);
      if (watch->count() == 0) return 0;
      std::this_thread::sleep_for(std::chrono::duration<double>(every));
      try {
        s = merged(json::parse(ask_job(dirs.front(), "status", std::chrono::seconds(5))));
      } catch (const std::exception&) {
        std::printf("job ended\n");
        return 0;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun status: %s\n", e.what());
    return 1;
  }
}

}  // namespace spark::launch
