#include "stack_dump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "spark/protocol/rank_env.hpp"
#include "spawn.hpp"

namespace spark::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<std::string> find_tool(const char* name) {
  const char* path = std::getenv("PATH");
  return resolve_program(name, path && *path ? path : "/usr/bin:/bin");
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string read_from(const std::string& path, off_t offset) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Running {
  StackTarget target;
  pid_t tool = -1;
  int out = -1;
  std::string text;
  bool done = false;
};

}  // namespace

std::string python_stack_file(const std::string& job_dir, int rank) {
  return job_dir + "/pystacks.r" + std::to_string(rank);
}

std::string collect_stacks(const std::vector<StackTarget>& targets,
                           std::chrono::milliseconds budget) {
  const auto deadline = Clock::now() + budget;
  std::ostringstream report;
  // Python frames first: faulthandler writes from the rank's own signal handler, which a
  // ptrace attach would hold up. At most a quarter of the budget.
  std::vector<std::pair<const StackTarget*, off_t>> python;
  for (const auto& t : targets) {
    const off_t before = t.python_file.empty() ? -1 : file_size(t.python_file);
    if (before < 0) continue;
    python.emplace_back(&t, before);
    ::kill(t.pid, SIGRTMIN + protocol::rank_env::kPyStacksSignalOffset);
  }
  std::vector<std::string> python_text(python.size());
  if (!python.empty()) {
    const auto until = Clock::now() + budget / 4;
    off_t last_total = -1;
    while (Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      off_t total = 0;
      bool all_grew = true;
      for (const auto& [t, before] : python) {
        const off_t now = file_size(t->python_file);
        total += now;
        all_grew = all_grew && now > before;
      }
      if (all_grew && total == last_total) break;  // every rank wrote, and nothing more comes
      last_total = total;
    }
    for (std::size_t i = 0; i < python.size(); ++i)
      python_text[i] = read_from(python[i].first->python_file, python[i].second);
  }

  std::string tool_name;
  std::vector<std::string> tool_args;
  if (auto p = find_tool("eu-stack")) {
    tool_name = *p;
    tool_args = {"eu-stack", "-p"};
  } else if (auto g = find_tool("gdb")) {
    tool_name = *g;
    tool_args = {"gdb", "-nx", "-batch", "-ex", "thread apply all bt", "-p"};
  }
  std::vector<Running> runs(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    runs[i].target = targets[i];
    if (tool_name.empty()) continue;
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) continue;
    SpawnRequest req;
    req.path = tool_name;
    req.argv = tool_args;
    req.argv.push_back(std::to_string(targets[i].pid));
    for (const char* name : {"PATH", "HOME", "LANG"})
      if (const char* v = std::getenv(name)) req.envp.push_back(std::string(name) + "=" + v);
    req.stdout_fd = p[1];
    req.stderr_fd = p[1];
    try {
      StartedChild c = start_child(req);
      ::close(p[1]);
      if (auto failure = await_exec(c, tool_name)) {
        runs[i].text = "(cannot run " + tool_name + ": " + *failure + ")\n";
        ::close(p[0]);
        continue;
      }
      runs[i].tool = c.pid;
      runs[i].out = p[0];
      ::fcntl(p[0], F_SETFL, O_NONBLOCK);
    } catch (const std::exception& e) {
      ::close(p[0]);
      ::close(p[1]);
      runs[i].text = std::string("(cannot start the stack tool: ") + e.what() + ")\n";
    }
  }
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Running*> who;
    for (auto& r : runs)
      if (r.out >= 0) fds.push_back({r.out, POLLIN, 0}), who.push_back(&r);
    if (fds.empty()) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[16384];
      const ssize_t n = ::read(who[i]->out, buf, sizeof buf);
      if (n > 0) {
        if (who[i]->text.size() < (4u << 20)) who[i]->text.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        ::close(who[i]->out);
        who[i]->out = -1;
        who[i]->done = true;
      }
    }
  }
  for (auto& r : runs) {
    if (r.tool <= 0) continue;
    if (!r.done) {
      ::kill(-r.tool, SIGKILL);
      r.text += "\n(cut off: the stack step's time was over)\n";
    }
    if (r.out >= 0) ::close(r.out);
    ::waitpid(r.tool, nullptr, 0);
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Running& r = runs[i];
    report << "=== rank " << r.target.rank << " (pid " << r.target.pid << ") ===\n";
    for (std::size_t k = 0; k < python.size(); ++k)
      if (python[k].first->rank == r.target.rank) {
        report << "--- Python frames (faulthandler) ---\n"
               << (python_text[k].empty() ? "(none written in time)\n" : python_text[k])
               << "--- native threads ---\n";
      }
    if (tool_name.empty())
      report << "(no eu-stack or gdb on this host: install elfutils)\n";
    else
      report << r.text;
    report << "\n";
  }
  return report.str();
}

}  // namespace spark::launch
