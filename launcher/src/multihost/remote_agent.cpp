#include "remote_agent.hpp"

#include "usage_error.hpp"

namespace spark::launch {

std::vector<std::string> split_agent_command(std::string_view cmd) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < cmd.size()) {
        cur.push_back(cmd[++i]);
      } else {
        cur.push_back(c);
      }
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < cmd.size()) {
      cur.push_back(cmd[++i]);
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
    } else {
      cur.push_back(c);
      in_word = true;
    }
  }
  if (quote) throw UsageError("--launch-agent: unterminated quote in '" + std::string(cmd) + "'");
  if (in_word) words.push_back(std::move(cur));
  if (words.empty()) throw UsageError("--launch-agent: empty command");
  return words;
}

std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

std::vector<std::string> agent_argv(std::string_view agent, const std::string& host,
                                    const std::vector<std::string>& daemon_argv) {
  std::vector<std::string> argv = split_agent_command(agent);
  bool substituted = false;
  for (auto& w : argv) {
    for (size_t pos = w.find("{host}"); pos != std::string::npos;
         pos = w.find("{host}", pos + host.size())) {
      w.replace(pos, 6, host);
      substituted = true;
    }
  }
  if (!substituted) argv.push_back(host);
  const std::string& prog = argv.front();
  const std::string base =
      prog.substr(prog.rfind('/') == std::string::npos ? 0 : prog.rfind('/') + 1);
  const bool via_shell = base == "ssh" || base == "rsh";
  for (const auto& a : daemon_argv) argv.push_back(via_shell ? shell_quote(a) : a);
  return argv;
}

}  // namespace spark::launch
