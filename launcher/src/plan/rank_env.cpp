#include "rank_env.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <unordered_map>

#include "spark/protocol/rank_env.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool user_set(const std::string& name, const std::vector<std::string>& base,
              const std::vector<EnvVar>& exports) {
  for (const auto& [k, v] : exports)
    if (k == name) return true;
  for (const auto& entry : base)
    if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
        entry[name.size()] == '=')
      return true;
  return false;
}

}  // namespace

std::vector<EnvVar> unless_set(std::vector<EnvVar> vars, const std::vector<std::string>& base,
                               const std::vector<EnvVar>& exports) {
  std::erase_if(vars, [&](const EnvVar& v) { return user_set(v.first, base, exports); });
  return vars;
}

EnvVar resolve_export(std::string_view arg, const std::vector<std::string>& environment) {
  size_t eq = arg.find('=');
  std::string name(arg.substr(0, eq));
  if (!valid_name(name)) {
    throw UsageError("-x " + std::string(arg) + ": '" + name + "' is not a valid variable name");
  }
  if (eq != std::string_view::npos) return {name, std::string(arg.substr(eq + 1))};
  for (const auto& entry : environment) {
    if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
        entry[name.size()] == '=') {
      return {name, entry.substr(name.size() + 1)};
    }
  }
  throw UsageError("-x " + name + ": " + name +
                   " is not set in sparkrun's environment; give a value with -x " + name +
                   "=VALUE");
}

std::vector<EnvVar> identity_env(const RankIdentity& id) {
  namespace names = protocol::rank_env;
  std::vector<EnvVar> env = {
      {names::kRank, std::to_string(id.rank)},
      {names::kSize, std::to_string(id.size)},
      {names::kLocalRank, std::to_string(id.local_rank)},
      {names::kLocalSize, std::to_string(id.local_size)},
      {names::kNodeRank, std::to_string(id.node_rank)},
      {names::kJobId, id.job_id},
      {names::kHost, id.host},
  };
  if (!id.cpuset.empty()) env.emplace_back(names::kCpuset, id.cpuset);
  if (!id.lanes.empty()) env.emplace_back(names::kLanes, id.lanes);
  if (!id.job_dir.empty()) env.emplace_back(names::kJobDir, id.job_dir);
  return env;
}

std::vector<EnvVar> torchrun_env(const RankIdentity& id, const std::vector<std::string>& base,
                                 const std::vector<EnvVar>& exports) {
  return unless_set({{"RANK", std::to_string(id.rank)},
                     {"LOCAL_RANK", std::to_string(id.local_rank)},
                     {"WORLD_SIZE", std::to_string(id.size)},
                     {"LOCAL_WORLD_SIZE", std::to_string(id.local_size)},
                     {"GROUP_RANK", std::to_string(id.node_rank)}},
                    base, exports);
}

std::vector<EnvVar> restart_env(int restart_count, int max_restarts,
                                const std::vector<std::string>& base,
                                const std::vector<EnvVar>& exports) {
  std::vector<EnvVar> env = {{protocol::rank_env::kRestartCount, std::to_string(restart_count)}};
  for (auto& v : unless_set({{"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
                             {"TORCHELASTIC_MAX_RESTARTS", std::to_string(max_restarts)}},
                            base, exports))
    env.push_back(std::move(v));
  return env;
}

std::vector<EnvVar> torchrun_master_env(const std::string& addr, int port,
                                        const std::vector<std::string>& base,
                                        const std::vector<EnvVar>& exports) {
  // USE_LIBUV=0: torch's env:// store without libuv, which every torch has; builds without
  // libuv (Debian's torch) refuse the default otherwise, and a job of a few ranks gains
  // nothing from it.
  return unless_set(
      {{"MASTER_ADDR", addr}, {"MASTER_PORT", std::to_string(port)}, {"USE_LIBUV", "0"}}, base,
      exports);
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket (MASTER_PORT)");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), "bind (MASTER_PORT)");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<std::string> build_env(const std::vector<std::string>& base,
                                   const std::vector<std::vector<EnvVar>>& layers) {
  std::vector<std::string> out;
  out.reserve(base.size() + 32);
  std::unordered_map<std::string, size_t> index;
  auto set = [&](std::string name, const std::string& value) {
    auto it = index.find(name);
    std::string entry = name + "=" + value;
    if (it != index.end()) {
      out[it->second] = std::move(entry);
    } else {
      index.emplace(std::move(name), out.size());
      out.push_back(std::move(entry));
    }
  };
  for (const auto& entry : base) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // malformed: not passed on
    set(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& layer : layers) {
    for (const auto& [name, value] : layer) set(name, value);
  }
  return out;
}

}  // namespace spark::launch
