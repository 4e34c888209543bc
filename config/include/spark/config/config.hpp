// libspark's configuration: one declarative table of every environment knob, strict parsing,
// and an immutable snapshot read once when a communicator starts.
//
//   auto cfg = spark::config::Config::from_environment();   // throws spark::ConfigError
//   cfg.timeout_ms();                                        // SPARKNET_ROCE_TIMEOUT_MS
//
// Tests build snapshots with Config::from_map({{"SPARK_RANK", "1"}, ...}) instead of setenv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spark/config/options.hpp"

namespace spark::config {

/// How a knob's value is parsed and checked.
enum class KnobType : std::uint8_t {
  integer,       ///< decimal integer in [min, max]
  milliseconds,  ///< decimal integer number of milliseconds in [min, max]
  choice,        ///< one of the '|'-separated words in `choices`
  string,        ///< free text (must not be empty when set)
  path,          ///< a file system path (must not be empty when set)
  host_port,     ///< HOST:PORT, PORT in 1..65535
  port_range,    ///< FIRST-LAST or one PORT, ports in 1..65535, FIRST <= LAST
  refused,       ///< a removed variable: setting it at all (even empty) is an error
  unchecked,     ///< read by a build or test script, not by sparkrun or libspark: any value
};

/// Who normally sets the variable (used to group the generated reference).
enum class KnobOrigin : std::uint8_t {
  user,      ///< tuning knobs a user sets
  launcher,  ///< set by sparkrun for every rank (may also be set by hand)
  tool,      ///< the path of a program sparkrun starts (its subcommands' rank-side tools)
  scripts,   ///< read by the build and test scripts and test hooks (known names, not typos)
  torchrun,  ///< torchrun's variables, read for compatibility
  removed,   ///< refused variables of the old RoCE library
};

/// Whether ranks may differ in a knob. job: both ends of a connection must agree (transport
/// choice, lanes per peer, deadlines that decide who reports a failure, shm names), so the
/// wire-up compares every rank's value and a difference fails every rank at once
/// (comm/settings_digest.hpp) instead of hanging until a timeout blames an innocent rank.
enum class KnobScope : std::uint8_t {
  rank,  ///< each rank may have its own value (addresses, devices, logging)
  job,   ///< the same on every rank of the job
};

struct Knob;
/// Fills the field a row is bound to (UCX: the field's offset in its part's options) from the
/// row's validated value; nullptr for rows that their part reads by name (Config::value).
using FillField = void (*)(CommOptions& options, const Knob& knob, const std::string& value);

struct Knob {
  std::string_view name;
  std::string_view type;  ///< human-readable type, e.g. "milliseconds", "auto|tcp|shm|roce"
  std::string_view default_value;  ///< "" = unset (no default)
  std::string_view doc;            ///< one or two sentences for --print-config and the docs
  KnobType kind = KnobType::string;
  KnobOrigin origin = KnobOrigin::user;
  std::int64_t min = 0;      ///< integer / milliseconds only
  std::int64_t max = 0;      ///< integer / milliseconds only
  std::string_view choices;  ///< choice only, '|'-separated
  FillField fill = nullptr;  ///< the CommOptions member this knob fills (CommOptions::from_config)
  KnobScope scope = KnobScope::rank;  ///< job: compared across ranks at wire-up
};

/// Every variable libspark reads (SPARK_*, SPARKNET_*, torchrun's), in a fixed order.
std::span<const Knob> knobs() noexcept;
/// The table entry for `name`, or nullptr.
const Knob* find_knob(std::string_view name) noexcept;

/// Apache Spark's SPARK_* names (SPARK_HOME, SPARK_CONF_DIR, SPARK_MASTER_*, ...; a trailing
/// '_' is a prefix): another program's variables, never taken for typos of ours.
std::span<const std::string_view> other_programs_names() noexcept;
bool is_other_programs_name(std::string_view name) noexcept;
/// The known SPARK_* / SPARKNET_* name a mistyped one most likely meant, or nullptr when none
/// is near (nearest_name.cpp: the one rule, for libspark and the launcher).
const Knob* nearest_knob(std::string_view name);
/// Optimal string alignment distance (Damerau-Levenshtein: insertions, deletions,
/// substitutions and swaps of two adjacent characters each cost 1).
std::size_t edit_distance(std::string_view a, std::string_view b);
/// The one wording for a SPARK_* / SPARKNET_* name that is set but not in the table:
/// "SPARK_TRASNPORT is not a sparkrun setting (did you mean SPARK_TRANSPORT?)".
std::string unknown_name_warning(std::string_view name);

enum class BootstrapKind : std::uint8_t { auto_select, pmix, env, singleton };
enum class LogLevel : std::uint8_t { error, warn, info, trace };

/// Where a value in a snapshot came from (option: sparkrun's -x, for --print-config).
enum class Source : std::uint8_t { default_value, environment, map, option };

/// An immutable snapshot of every knob, validated as a whole. Copyable, cheap.
class Config {
 public:
  /// Defaults only (as from_map({})).
  Config();

  /// Reads every knob from the process environment once. Throws spark::ConfigError naming the
  /// variable, its value and the accepted range for the first invalid or refused variable.
  static Config from_environment();
  /// The same, with `options` (sparkrun's -x NAME=value, resolved) winning over the
  /// environment: what the ranks would read (`sparkrun --print-config -x ...`).
  static Config from_environment(const std::map<std::string, std::string>& options);
  /// The same checks on a map of NAME -> value (tests; no setenv). Names not in the table are
  /// ignored except PMIX_* detection variables (PMIX_RANK, PMIX_NAMESPACE).
  static Config from_map(const std::map<std::string, std::string>& values);

  // --- fail-stop and timeouts --------------------------------------------------------------
  std::uint32_t timeout_ms() const noexcept;       ///< SPARKNET_ROCE_TIMEOUT_MS (10000)
  std::uint32_t join_timeout_ms() const noexcept;  ///< SPARK_JOIN_TIMEOUT_MS (60000)

  // --- transports --------------------------------------------------------------------------
  std::string transport() const;  ///< SPARK_TRANSPORT (auto)

  // --- bootstrap -----------------------------------------------------------------------------
  BootstrapKind bootstrap() const noexcept;  ///< SPARK_BOOTSTRAP (auto)
  /// True when PMIX_RANK or PMIX_NAMESPACE was present: a PMIx server launched this process.
  bool pmix_present() const noexcept;

  // --- diagnostics ---------------------------------------------------------------------------
  LogLevel log_level() const noexcept;  ///< SPARK_LOG level part (warn)
  /// SPARK_LOG subsystems ("SPARK_LOG=info:tcp,bootstrap"); empty = all.
  const std::vector<std::string>& log_subsystems() const noexcept;

  // --- generic access ------------------------------------------------------------------------
  /// The raw (validated) value of a knob, or nullopt when unset and without default: how the
  /// bootstrap and the tools read their rows (the communicator's fill CommOptions).
  std::optional<std::string> value(std::string_view name) const;
  /// An integer knob's value (e.g. integer("SPARK_RANK")), or nullopt when unset.
  std::optional<int> integer(std::string_view name) const;
  Source source(std::string_view name) const;
  /// SPARK_* / SPARKNET_* names that were set but are not in the table (likely typos; Apache
  /// Spark's are left out, is_other_programs_name).
  const std::vector<std::string>& unknown_variables() const noexcept;
  /// For `sparkrun --print-config`: one block per knob with value, source and doc. The unknown
  /// names are not in it: the caller warns about each (unknown_name_warning) on stderr.
  std::string describe_sources() const;

 private:
  struct Entry {
    std::optional<std::string> value;
    Source source = Source::default_value;
  };
  struct Blank {};
  explicit Config(Blank) {}
  static Config build(const std::map<std::string, std::string>& values, Source source,
                      const std::map<std::string, std::string>& options = {});
  const Entry& entry(std::string_view name) const;

  std::map<std::string, Entry, std::less<>> entries_;
  std::vector<std::string> unknown_;
  std::vector<std::string> log_subsystems_;
  bool pmix_present_ = false;
  std::uint32_t timeout_ms_ = 0;
  std::uint32_t join_timeout_ms_ = 0;
  BootstrapKind bootstrap_ = BootstrapKind::auto_select;
  LogLevel log_level_ = LogLevel::warn;
};

/// Strict parsing helpers (exposed for the launcher and tests). Each throws spark::ConfigError
/// with the exact message format used by Config.
std::int64_t parse_integer(const Knob& knob, std::string_view value);
std::string_view parse_choice(const Knob& knob, std::string_view value);
/// A port_range value: {first, last} ("50000" is {50000, 50000}).
std::pair<int, int> parse_port_range(const Knob& knob, std::string_view value);

}  // namespace spark::config
