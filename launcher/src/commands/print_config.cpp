#include "print_config.hpp"

#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "forwarded_env.hpp"
#include "spark/config/config.hpp"

extern char** environ;  // NOLINT: POSIX

namespace spark::launch {

int print_config(const std::vector<std::string>& exports) {
  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  std::map<std::string, std::string> given;  // -x, resolved as for a launch (last one wins)
  const ForwardedEnv x = resolve_x_args(environment, exports);  // patterns too
  for (const auto& w : x.warnings) std::fprintf(stderr, "sparkrun: warning: %s\n", w.c_str());
  for (const auto& [name, value] : x.vars) given[name] = value;
  try {
    const auto config = spark::config::Config::from_environment(given);
    for (const auto& name : config.unknown_variables()) {
      std::fprintf(stderr, "sparkrun: warning: %s\n",
                   spark::config::unknown_name_warning(name).c_str());
    }
    std::string table = config.describe_sources();
    std::fwrite(table.data(), 1, table.size(), stdout);
    if (!table.empty() && table.back() != '\n') std::fputc('\n', stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace spark::launch
