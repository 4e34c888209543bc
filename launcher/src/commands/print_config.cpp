#include "print_config.hpp"

#include <cstdio>
#include <exception>
#include <string>

#include "config/config.hpp"

namespace spark::launch {

int print_config() {
  try {
    std::string table = spark::config::Config::from_environment().describe_sources();
    std::fwrite(table.data(), 1, table.size(), stdout);
    if (!table.empty() && table.back() != '\n') std::fputc('\n', stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparkrun: error: %s\n", e.what());
    return 2;
  }
}

}  // namespace spark::launch
