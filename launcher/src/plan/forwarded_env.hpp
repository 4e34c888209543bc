// The environment rule, once for every path (one host, node daemons over a launch agent,
// SLURM steps): which of sparkrun's variables reach the ranks on every host. A node daemon
// starts its ranks from its own environment (what the launch agent gave it: ssh's is
// nearly empty) overlaid by these. docs/launcher.md ("Environment") documents the rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rank_env.hpp"

namespace spark::launch {

struct ForwardedEnv {
  std::vector<EnvVar> vars;           // to set on every rank, names unique, -x values last
  std::vector<std::string> warnings;  // "-x 'NCCL_*' matches no variable ..." (not errors)
};

/// True for SPARK_* and SPARKNET_* names: forwarded by default (the knobs every rank must see
/// alike), except the per-rank identity variables sparkrun sets itself (SPARK_RANK, ...).
bool is_sparkrun_variable(std::string_view name);

/// True for the names --env-all leaves to each host: they describe this machine or this
/// shell (HOSTNAME, PWD, SSH_*, TMPDIR, SLURM_*, ...). The list is in forwarded_env.cpp and
/// docs/launcher.md.
bool is_host_specific(std::string_view name);

/// The -x part alone (--print-config shows what -x sets): NAME, NAME=value and patterns as
/// below, warnings for patterns that match nothing.
ForwardedEnv resolve_x_args(const std::vector<std::string>& environment,
                            const std::vector<std::string>& x_args);

/// The variables to send. `environment`: sparkrun's ("NAME=value"); `x_args`: the -x
/// arguments in order: NAME (its value here; UsageError when unset), NAME=value, or a glob
/// pattern (`NCCL_*`, fnmatch) taking every matching variable of `environment` (a warning
/// when none matches); `env_all`: every variable except the host-specific ones. Every
/// SPARK_* / SPARKNET_* variable is sent in any case. Later entries win (-x over the rest).
ForwardedEnv forwarded_env(const std::vector<std::string>& environment,
                           const std::vector<std::string>& x_args, bool env_all);

}  // namespace spark::launch
