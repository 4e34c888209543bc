#include "print_config.hpp"

#include <cstdio>
#include <exception>
#include <string>

#ifdef SPARK_LAUNCH_HAVE_CONFIG
#include "config/config.hpp"
#endif

namespace spark::launch {

int print_config() {
#ifdef SPARK_LAUNCH_HAVE_CONFIG
  try {
    std::string table = spark::config::Config::from_environment().describe_sources();
    std::fwrite(table.data(), 1, table.size(), stdout);
    if (!table.empty() && table.back() != '\n') std::fputc('\n', stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return 2;
  }
#else
  std::fprintf(stderr,
               "sparkrun: --print-config: this sparkrun was built without libspark's "
               "configuration table (spark_config)\n");
  return 2;
#endif
}

}  // namespace spark::launch
