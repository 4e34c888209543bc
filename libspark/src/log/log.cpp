#include "log/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>

namespace spark::log {
namespace {

struct State {
  std::mutex m;
  Level level = Level::warn;
  std::vector<std::string> subsystems;  // empty: all
  std::string host;                     // empty: gethostname() at the first line
  std::string rank = "?";
};

State& state() {
  static State* s = new State;  // never destroyed: threads may log during exit
  return *s;
}

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace

void configure(Level level, std::vector<std::string> subsystems) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.level = level;
  s.subsystems = std::move(subsystems);
}

void set_host(std::string host) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.host = std::move(host);
}

void set_rank(std::string rank) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.rank = std::move(rank);
}

bool enabled(Level level, std::string_view subsystem) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  if (level > s.level) return false;
  // The subsystem filter narrows info and trace; errors and warnings always pass.
  if (level <= Level::warn || s.subsystems.empty()) return true;
  return std::find(s.subsystems.begin(), s.subsystems.end(), subsystem) != s.subsystems.end();
}

void line(std::string_view subsystem, std::string_view text) {
  std::string out;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.m);
    if (s.host.empty()) s.host = this_host();
    out.reserve(s.host.size() + s.rank.size() + subsystem.size() + text.size() + 24);
    out += s.host;
    out += ':';
    out += std::to_string(::getpid());
    out += " [";
    out += s.rank;
    out += "] ";
  }
  out += subsystem;
  out += ": ";
  out += text;
  out += '\n';
  // One write: a pipe takes up to PIPE_BUF bytes atomically, and sparkrun forwards whole lines.
  std::string_view rest(out);
  while (!rest.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace spark::log
