#include "forwarded_env.hpp"

#include <fnmatch.h>

#include <array>
#include <unordered_map>

#include "usage_error.hpp"

namespace spark::launch {
namespace {

// What --env-all does not send: each host keeps its own. Exact names, then prefixes.
//   HOSTNAME HOST: this machine's name; PWD OLDPWD: the shell's directory (the ranks' is
//   --wdir's business); SHLVL _: the shell's own bookkeeping; SSH_*: this login's connection
//   and agent socket; DISPLAY XAUTHORITY: this desktop; XDG_RUNTIME_DIR XDG_SESSION_*: this
//   login's session (a /run/user path that exists only here); TMPDIR: a directory that may
//   exist only here (SLURM and login sessions make per-job ones): each host's own is kept, -x
//   TMPDIR sends it anyway; SLURM_* SLURMD_*: per-node step variables (srun gives each node
//   its own); PMIX_* PMI_*: the client variables of the launch sparkrun itself may run in.
constexpr std::array<std::string_view, 10> kHostNames = {
    "HOSTNAME", "HOST",    "PWD",        "OLDPWD",          "SHLVL",
    "_",        "DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "TMPDIR"};
constexpr std::array<std::string_view, 6> kHostPrefixes = {"SSH_",    "XDG_SESSION_", "SLURM_",
                                                           "SLURMD_", "PMIX_",        "PMI_"};

bool is_pattern(std::string_view arg) {
  return arg.find_first_of("*?[") != std::string_view::npos &&
         arg.find('=') == std::string_view::npos;
}

// Keeps the first position of each name and the last value given for it.
class VarList {
 public:
  void set(const std::string& name, const std::string& value) {
    auto [it, fresh] = index_.emplace(name, vars_.size());
    if (fresh) {
      vars_.emplace_back(name, value);
    } else {
      vars_[it->second].second = value;
    }
  }
  std::vector<EnvVar> take() { return std::move(vars_); }

 private:
  std::vector<EnvVar> vars_;
  std::unordered_map<std::string, size_t> index_;
};

// The per-rank identity sparkrun sets itself (SPARK_RANK, ..., SPARK_LANES): never sent.
bool is_identity(std::string_view name) {
  for (const auto& [identity, value] : identity_env(RankIdentity{.cpuset = "-", .lanes = "-"})) {
    if (name == identity) return true;
  }
  return false;
}

}  // namespace

bool is_sparkrun_variable(std::string_view name) {
  return (name.starts_with("SPARK_") || name.starts_with("SPARKNET_")) && !is_identity(name);
}

bool is_host_specific(std::string_view name) {
  for (std::string_view n : kHostNames)
    if (name == n) return true;
  for (std::string_view p : kHostPrefixes)
    if (name.starts_with(p)) return true;
  return false;
}

ForwardedEnv resolve_x_args(const std::vector<std::string>& environment,
                            const std::vector<std::string>& x_args) {
  ForwardedEnv out;
  VarList vars;
  for (const auto& arg : x_args) {
    if (!is_pattern(arg)) {
      const auto [name, value] = resolve_export(arg, environment);
      vars.set(name, value);
      continue;
    }
    bool matched = false;
    for (const auto& entry : environment) {
      const size_t eq = entry.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      const std::string name = entry.substr(0, eq);
      if (::fnmatch(arg.c_str(), name.c_str(), 0) != 0) continue;
      vars.set(name, entry.substr(eq + 1));
      matched = true;
    }
    if (!matched) {
      out.warnings.push_back("-x '" + arg +
                             "' matches no variable of sparkrun's environment; nothing is sent "
                             "for it (check the spelling, or set the variables before sparkrun)");
    }
  }
  out.vars = vars.take();
  return out;
}

ForwardedEnv forwarded_env(const std::vector<std::string>& environment,
                           const std::vector<std::string>& x_args, bool env_all) {
  VarList vars;
  for (const auto& entry : environment) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = entry.substr(0, eq);
    if (is_sparkrun_variable(name) || (env_all && !is_host_specific(name) && !is_identity(name)))
      vars.set(name, entry.substr(eq + 1));
  }
  ForwardedEnv out = resolve_x_args(environment, x_args);
  for (const auto& [name, value] : out.vars) vars.set(name, value);
  out.vars = vars.take();
  return out;
}

}  // namespace spark::launch
