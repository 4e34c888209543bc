// The ranks' SPARK_* / SPARKNET_* environment (sparkrun's own, then -x) checked against
// libspark's knob table before anything starts (docs/reliability.md): a value every rank would
// refuse at init is refused by sparkrun, with the rank's own message, exit 2, nothing started;
// a name the table does not know is warned about, with the nearest known name.
// The names the launcher sets for every rank (SPARK_RANK, SPARK_SIZE, ...) are left out: the
// ranks never see the user's values of those.
#pragma once

#include <string>
#include <vector>

#include "rank_env.hpp"

namespace spark::launch {

/// The rank's ConfigError message, or empty when the values are accepted. `environment`:
/// "NAME=value" entries (sparkrun's environment); `exports`: the resolved -x variables, which
/// win.
std::string check_rank_env(const std::vector<std::string>& environment,
                           const std::vector<EnvVar>& exports);

/// One line per SPARK_* / SPARKNET_* name of the same two sources that is not in the knob table
/// (a typo, most likely): "SPARK_TRASNPORT is not a sparkrun setting (did you mean
/// SPARK_TRANSPORT?)", in name order. sparkrun prints them as warnings; the job still runs.
std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& environment,
                                                  const std::vector<EnvVar>& exports);

/// SPARK_LOG for sparkrun's own process (its per-host steps, subsystem "launch"), taken from
/// where the ranks take theirs (-x wins over the environment; check_rank_env refused a bad
/// value already). Lines say `who` ("sparkrun", a node daemon "daemon") as their [rank] and
/// `host` (empty: gethostname()) as their host (log/log.hpp).
void start_launch_log(const std::vector<std::string>& environment,
                      const std::vector<EnvVar>& exports, const std::string& host,
                      const std::string& who);

}  // namespace spark::launch
