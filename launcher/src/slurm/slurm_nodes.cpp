#include "slurm_nodes.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>

namespace spark::launch::slurm {
namespace {

bool resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const bool ok = ::getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0 && res != nullptr;
  if (res) ::freeaddrinfo(res);
  return ok;
}

// Runs argv (PATH lookup) and returns its stdout; empty on any failure. Bounded: the child
// is killed after `limit`.
std::string capture(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {};
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // sparkrun blocks signals for its signalfd
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  const auto end = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  ::kill(pid, SIGKILL);  // no-op when it has ended; a hung scontrol must not stay
  int status = 0;
  ::waitpid(pid, &status, 0);
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_node_addresses(std::string_view scontrol_output) {
  std::map<std::string, std::string> out;
  std::istringstream in{std::string(scontrol_output)};
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string name, addr;
    for (std::string w; words >> w;) {
      if (w.rfind("NodeName=", 0) == 0) name = w.substr(9);
      if (w.rfind("NodeAddr=", 0) == 0) addr = w.substr(9);
    }
    if (!name.empty() && !addr.empty()) out[name] = addr;
  }
  return out;
}

std::map<std::string, std::string> unresolved_node_addresses(
    const std::vector<std::string>& nodes) {
  std::string list;
  for (const auto& n : nodes) {
    if (!resolves(n)) list += (list.empty() ? "" : ",") + n;
  }
  if (list.empty()) return {};
  auto all = parse_node_addresses(
      capture({"scontrol", "-o", "show", "node", list}, std::chrono::seconds(10)));
  std::map<std::string, std::string> out;
  for (const auto& n : nodes) {
    auto it = all.find(n);
    if (it != all.end() && it->second != n) out[n] = it->second;
  }
  return out;
}

}  // namespace spark::launch::slurm
