// The Config snapshot: collects the knobs from a map or the environment, validates each value
// and the relations between them, and answers typed getters.
#include "spark/config/config.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "messages.hpp"
#include "spark/error.hpp"

extern char** environ;  // NOLINT: POSIX

namespace spark::config {
namespace {

bool starts_with_spark(std::string_view name) {
  return name.starts_with("SPARK_") || name.starts_with("SPARKNET_");
}

bool is_pmix_detection(std::string_view name) {
  return name == "PMIX_RANK" || name == "PMIX_NAMESPACE";
}

void validate_host_port(const Knob& knob, const std::string& value) {
  if (value.empty()) throw ConfigError(refusal(knob, value, empty_reason(knob)));
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw ConfigError(refusal(knob, value, "not HOST:PORT"));
  }
  const Knob port_knob{knob.name, "port", "", "", KnobType::integer, knob.origin, 1, 65535, {}};
  try {
    (void)parse_integer(port_knob, std::string_view(value).substr(colon + 1));
  } catch (const ConfigError&) {
    throw ConfigError(refusal(knob, value, "the port is not an integer in 1..65535"));
  }
}

void validate_ipv4(const Knob& knob, const std::string& value) {
  in_addr addr{};
  if (inet_pton(AF_INET, value.c_str(), &addr) != 1) {
    throw ConfigError(refusal(knob, value, "not a dotted IPv4 address"));
  }
}

constexpr std::string_view kLogLevels = "error|warn|info|trace";
// The subsystems that log (log/log.hpp's callers); a name outside the list is a typo that
// would silence the lines asked for, so it is refused.
constexpr std::string_view kLogSubsystems = "bootstrap|wireup|tcp|shm|roce|launch";

LogLevel parse_log_level(std::string_view level) {
  if (level == "error") return LogLevel::error;
  if (level == "warn") return LogLevel::warn;
  if (level == "info") return LogLevel::info;
  if (level == "trace") return LogLevel::trace;
  throw std::invalid_argument("level");
}

// SPARK_LOG=LEVEL[:SUBSYS,...]; subsystem names are lower-case words.
std::pair<LogLevel, std::vector<std::string>> parse_log(const Knob& knob,
                                                        const std::string& value) {
  const std::string expected =
      fmt::format("LEVEL[:SUBSYSTEM,...] with LEVEL one of {}", kLogLevels);
  auto fail = [&](std::string_view reason) {
    return ConfigError(fmt::format("{}=\"{}\" is refused: {}; valid: {}, default {}", knob.name,
                                   value, reason, expected, knob.default_value));
  };
  if (value.empty()) throw fail(empty_reason(knob));
  const auto colon = value.find(':');
  LogLevel level{};
  try {
    level = parse_log_level(std::string_view(value).substr(0, colon));
  } catch (const std::invalid_argument&) {
    throw fail("unknown level");
  }
  std::vector<std::string> subsystems;
  if (colon != std::string::npos) {
    std::string_view rest = std::string_view(value).substr(colon + 1);
    while (true) {
      const auto comma = rest.find(',');
      const auto word = rest.substr(0, comma);
      const bool ok = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
      if (!ok) throw fail("bad subsystem list");
      bool known = false;
      for (std::string_view k = kLogSubsystems; !known && !k.empty();) {
        const auto bar = k.find('|');
        known = k.substr(0, bar) == word;
        k = bar == std::string_view::npos ? std::string_view() : k.substr(bar + 1);
      }
      if (!known)
        throw fail(fmt::format("unknown subsystem \"{}\" (subsystems: {})", word, kLogSubsystems));
      subsystems.emplace_back(word);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  return {level, std::move(subsystems)};
}

void validate_value(const Knob& knob, const std::string& value) {
  switch (knob.kind) {
    case KnobType::integer:
    case KnobType::milliseconds:
      (void)parse_integer(knob, value);
      return;
    case KnobType::choice:
      (void)parse_choice(knob, value);
      return;
    case KnobType::string:
    case KnobType::path:
      if (value.empty()) throw ConfigError(refusal(knob, value, empty_reason(knob)));
      return;
    case KnobType::host_port:
      validate_host_port(knob, value);
      return;
    case KnobType::port_range:
      (void)parse_port_range(knob, value);
      return;
    case KnobType::refused:
      throw ConfigError(refused_variable_message(knob, value));
    case KnobType::unchecked:
      return;
  }
}

std::string_view source_name(Source s) {
  switch (s) {
    case Source::default_value:
      return "default";
    case Source::environment:
      return "environment";
    case Source::map:
      return "set";
    case Source::option:
      return "-x";
  }
  return "?";
}

}  // namespace

Config::Config() : Config(build({}, Source::map)) {}

Config Config::from_map(const std::map<std::string, std::string>& values) {
  return build(values, Source::map);
}

Config Config::from_environment() {
  return from_environment({});
}

Config Config::from_environment(const std::map<std::string, std::string>& options) {
  const auto relevant = [](std::string_view name) {
    return starts_with_spark(name) || find_knob(name) != nullptr || is_pmix_detection(name);
  };
  std::map<std::string, std::string> values;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const auto name = entry.substr(0, eq);
    if (relevant(name)) values.emplace(std::string(name), std::string(entry.substr(eq + 1)));
  }
  std::map<std::string, std::string> given;
  for (const auto& [name, value] : options)
    if (relevant(name)) given[name] = value;
  return build(values, Source::environment, given);
}

Config Config::build(const std::map<std::string, std::string>& base, Source base_source,
                     const std::map<std::string, std::string>& options) {
  Config cfg{Blank{}};
  std::map<std::string, std::string> values = base;
  for (const auto& [name, value] : options) values[name] = value;
  const auto source_of = [&](const std::string& name) {
    return options.count(name) != 0 ? Source::option : base_source;
  };
  // Removed variables first: they are the most likely to explain a surprising setup.
  for (const Knob& knob : knobs()) {
    if (knob.kind != KnobType::refused) continue;
    if (auto it = values.find(std::string(knob.name)); it != values.end()) {
      throw ConfigError(refused_variable_message(knob, it->second));
    }
  }
  for (const Knob& knob : knobs()) {
    Entry entry;
    if (auto it = values.find(std::string(knob.name)); it != values.end()) {
      validate_value(knob, it->second);
      entry.value = it->second;
      entry.source = source_of(it->first);
    } else if (!knob.default_value.empty()) {
      entry.value = std::string(knob.default_value);
    }
    cfg.entries_.emplace(std::string(knob.name), std::move(entry));
  }
  for (const auto& [name, value] : values) {
    if (is_pmix_detection(name)) cfg.pmix_present_ = true;
    if (starts_with_spark(name) && find_knob(name) == nullptr && !is_other_programs_name(name))
      cfg.unknown_.push_back(name);
  }

  // Typed values of the hot knobs, and value-specific checks.
  cfg.timeout_ms_ = static_cast<std::uint32_t>(parse_integer(
      *find_knob("SPARKNET_ROCE_TIMEOUT_MS"), *cfg.value("SPARKNET_ROCE_TIMEOUT_MS")));
  cfg.join_timeout_ms_ = static_cast<std::uint32_t>(
      parse_integer(*find_knob("SPARK_JOIN_TIMEOUT_MS"), *cfg.value("SPARK_JOIN_TIMEOUT_MS")));
  {
    const auto b = *cfg.value("SPARK_BOOTSTRAP");
    cfg.bootstrap_ = b == "pmix"        ? BootstrapKind::pmix
                     : b == "env"       ? BootstrapKind::env
                     : b == "singleton" ? BootstrapKind::singleton
                                        : BootstrapKind::auto_select;
  }
  {
    auto [level, subsystems] = parse_log(*find_knob("SPARK_LOG"), *cfg.value("SPARK_LOG"));
    cfg.log_level_ = level;
    cfg.log_subsystems_ = std::move(subsystems);
  }
  if (auto addr = cfg.value("SPARK_TCP_ADDR")) validate_ipv4(*find_knob("SPARK_TCP_ADDR"), *addr);

  // Relations between knobs.
  auto check_pair = [&](std::string_view rank_name, std::string_view size_name, bool need_both) {
    const auto r = cfg.integer(rank_name);
    const auto s = cfg.integer(size_name);
    if (need_both && r.has_value() != s.has_value()) {
      const auto set = r ? rank_name : size_name;
      const auto unset = r ? size_name : rank_name;
      throw ConfigError(fmt::format("{}={} is set but {} is not: set both (or neither)", set,
                                    *cfg.value(set), unset));
    }
    if (r && s && *r >= *s) {
      throw ConfigError(
          fmt::format("{}={} is refused: it must be less than {}={} (valid ranks are 0..{})",
                      rank_name, *r, size_name, *s, *s - 1));
    }
  };
  check_pair("SPARK_RANK", "SPARK_SIZE", true);
  check_pair("SPARK_LOCAL_RANK", "SPARK_LOCAL_SIZE", false);
  check_pair("RANK", "WORLD_SIZE", false);
  check_pair("LOCAL_RANK", "LOCAL_WORLD_SIZE", false);
  if (const auto ls = cfg.integer("SPARK_LOCAL_SIZE"), s = cfg.integer("SPARK_SIZE");
      ls && s && *ls > *s) {
    throw ConfigError(
        fmt::format("SPARK_LOCAL_SIZE={} is refused: it must not exceed SPARK_SIZE={}", *ls, *s));
  }
  return cfg;
}

const Config::Entry& Config::entry(std::string_view name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw InvalidUsage(fmt::format("libspark: {} is not a configuration knob", name));
  }
  return it->second;
}

std::optional<std::string> Config::value(std::string_view name) const {
  return entry(name).value;
}

Source Config::source(std::string_view name) const {
  return entry(name).source;
}

std::optional<int> Config::integer(std::string_view name) const {
  const auto& e = entry(name);
  if (!e.value) return std::nullopt;
  return static_cast<int>(parse_integer(*find_knob(name), *e.value));
}

std::uint32_t Config::timeout_ms() const noexcept {
  return timeout_ms_;
}
std::uint32_t Config::join_timeout_ms() const noexcept {
  return join_timeout_ms_;
}
std::string Config::transport() const {
  return *value("SPARK_TRANSPORT");
}
BootstrapKind Config::bootstrap() const noexcept {
  return bootstrap_;
}
bool Config::pmix_present() const noexcept {
  return pmix_present_;
}
LogLevel Config::log_level() const noexcept {
  return log_level_;
}
const std::vector<std::string>& Config::log_subsystems() const noexcept {
  return log_subsystems_;
}
const std::vector<std::string>& Config::unknown_variables() const noexcept {
  return unknown_;
}

std::string Config::describe_sources() const {
  std::string out = "# libspark configuration: NAME=VALUE [source]\n";
  for (const Knob& knob : knobs()) {
    if (knob.kind == KnobType::refused) continue;  // set ones never get this far
    const Entry& e = entry(knob.name);
    out += fmt::format("{}={} [{}]\n    {}{}; {}\n", knob.name, e.value ? *e.value : "(unset)",
                       source_name(e.source), knob.type,
                       knob.scope == KnobScope::job ? "; the same on every rank" : "", knob.doc);
  }
  return out;
}

}  // namespace spark::config

namespace spark {

CommOptions CommOptions::from_config(const config::Config& config) {
  CommOptions o;
  o.spin_auto = true;  // until SPARK_SPIN_US fills spin_us
  for (const config::Knob& knob : config::knobs()) {
    const auto value = config.value(knob.name);
    if (knob.fill && value) knob.fill(o, knob, *value);
    if (knob.scope != config::KnobScope::job) continue;
    // Numbers compare by value ("010" is 10), everything else as written.
    const bool number =
        knob.kind == config::KnobType::integer || knob.kind == config::KnobType::milliseconds;
    o.job_settings.emplace_back(knob.name, !value ? ""
                                           : number
                                               ? std::to_string(config::parse_integer(knob, *value))
                                               : *value);
  }
  return o;
}

}  // namespace spark
