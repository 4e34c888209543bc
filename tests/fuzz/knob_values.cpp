// Knob values from the environment (SPARK_* / SPARKNET_*, torchrun's variables; the knob
// table in config/src/knobs.cpp). Input: records [knob index][length][value bytes],
// so the snapshot's cross checks (SPARK_RANK < SPARK_SIZE, ...) see several knobs at once.
// A bad value must be a ConfigError naming the variable; a valid snapshot must answer every
// accessor and print itself (--print-config) without throwing anything else.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "fuzz_seeds.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace cfg = spark::config;

namespace {

std::string record(std::string_view name, std::string_view value) {
  const auto table = cfg::knobs();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].name == name) {
      return std::string(1, static_cast<char>(i)) + static_cast<char>(value.size()) +
             std::string(value);
    }
  }
  __builtin_trap();  // a seed names a knob that left the table: update write_seeds
}

void write_seeds(const char* dir) {
  using spark::fuzz::write_seed;
  write_seed(dir, "rank_size",
             record("SPARK_RANK", "1") + record("SPARK_SIZE", "4") +
                 record("SPARK_LOCAL_RANK", "0") + record("SPARK_LOCAL_SIZE", "2"));
  write_seed(dir, "transport",
             record("SPARK_TRANSPORT", "tcp") + record("SPARK_TCP_LANES", "2") +
                 record("SPARK_TCP_ADDR", "10.0.0.1") + record("SPARK_SPIN_US", "50"));
  write_seed(dir, "timeouts",
             record("SPARKNET_ROCE_TIMEOUT_MS", "500") + record("SPARK_LOG", "info:tcp,bootstrap") +
                 record("SPARK_ON_FAILURE", "raise"));
  write_seed(dir, "rendezvous",
             record("SPARK_RENDEZVOUS", "127.0.0.1:29500") + record("SPARK_BOOTSTRAP", "env") +
                 record("MASTER_PORT", "29500") + record("WORLD_SIZE", "2"));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spark::fuzz::seeds_requested(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto table = cfg::knobs();
  std::map<std::string, std::string> values;
  std::size_t i = 0;
  while (i + 2 <= size) {
    const auto& knob = table[data[i] % table.size()];
    const std::size_t n = std::min<std::size_t>(data[i + 1], size - i - 2);
    values[std::string(knob.name)] = std::string(reinterpret_cast<const char*>(data) + i + 2, n);
    i += 2 + n;
  }
  try {
    const auto c = cfg::Config::from_map(values);
    (void)c.timeout_ms();
    (void)c.transport();
    (void)spark::CommOptions::from_config(c);
    (void)c.bootstrap();
    (void)c.integer("SPARK_RANK");
    (void)c.integer("SPARK_SIZE");
    (void)c.integer("SPARK_LOCAL_RANK");
    (void)c.integer("SPARK_LOCAL_SIZE");
    (void)c.integer("SPARK_NODE_RANK");
    (void)c.integer("RANK");
    (void)c.integer("WORLD_SIZE");
    (void)c.integer("MASTER_PORT");
    (void)c.log_level();
    (void)c.log_subsystems();
    (void)c.describe_sources();
  } catch (const spark::ConfigError&) {
  }
  return 0;
}
