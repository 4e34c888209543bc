// The launch agent: the command that starts `sparkrun --daemon` on a remote host.
// Default `ssh -o BatchMode=yes {host}`; `--launch-agent 'CMD'` replaces it. "{host}" in
// CMD is replaced by the host's name from the host list; without "{host}" the name is
// appended (ssh style). The daemon's arguments follow. An ssh agent hands the remote
// shell one command string, so the arguments are shell-quoted then; other agents (e.g.
// `ip netns exec {host}`, `srun ...`) exec them directly and get them unquoted.
// The job secret is never part of this command: it goes to the agent's stdin.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace spark::launch {

inline constexpr std::string_view kDefaultLaunchAgent = "ssh -o BatchMode=yes {host}";

/// Splits CMD into words: whitespace separates, '...' and "..." group, backslash escapes.
/// Throws UsageError on an unterminated quote or an empty command.
std::vector<std::string> split_agent_command(std::string_view cmd);

/// The full argv for one host: agent words with {host} substituted (or host appended),
/// then the daemon's argv (shell-quoted when the agent is ssh).
std::vector<std::string> agent_argv(std::string_view agent, const std::string& host,
                                    const std::vector<std::string>& daemon_argv);

/// Quotes one word for a POSIX shell ('...' with embedded quotes escaped).
std::string shell_quote(std::string_view word);

}  // namespace spark::launch
