#include "env_check.hpp"

#include <map>
#include <string_view>

#include "log/log.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace spark::launch {

namespace {

bool is_spark_name(std::string_view name) {
  return name.starts_with("SPARK_") || name.starts_with("SPARKNET_");
}

// The SPARK_* / SPARKNET_* values the ranks would see: sparkrun's environment, then -x.
std::map<std::string, std::string> spark_values(const std::vector<std::string>& environment,
                                                const std::vector<EnvVar>& exports) {
  std::map<std::string, std::string> values;
  for (const auto& entry : environment) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    std::string name = entry.substr(0, eq);
    if (is_spark_name(name)) values[std::move(name)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : exports) {
    if (is_spark_name(name)) values[name] = value;
  }
  return values;
}

}  // namespace

std::vector<std::string> unknown_setting_warnings(const std::vector<std::string>& environment,
                                                  const std::vector<EnvVar>& exports) {
  std::vector<std::string> lines;
  for (const auto& [name, value] : spark_values(environment, exports))
    if (config::find_knob(name) == nullptr && !config::is_other_programs_name(name))
      lines.push_back(config::unknown_name_warning(name));
  return lines;
}

std::string check_rank_env(const std::vector<std::string>& environment,
                           const std::vector<EnvVar>& exports) {
  std::map<std::string, std::string> values = spark_values(environment, exports);
  for (const auto& [name, value] : identity_env(RankIdentity{})) values.erase(name);
  for (const auto& [name, value] : restart_env(0, 0, {}, {})) values.erase(name);
  if (values.empty()) return {};  // the defaults are valid by construction
  try {
    (void)config::Config::from_map(values);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

void start_launch_log(const std::vector<std::string>& environment,
                      const std::vector<EnvVar>& exports, const std::string& host,
                      const std::string& who) {
  const auto values = spark_values(environment, exports);
  if (const auto it = values.find("SPARK_LOG"); it != values.end()) {
    try {
      log::configure(config::Config::from_map({{it->first, it->second}}));
    } catch (const ConfigError&) {
      // Refused before launch (check_rank_env); a daemon keeps the default.
    }
  }
  if (!host.empty()) log::set_host(host);
  log::set_rank(who);
}

}  // namespace spark::launch
