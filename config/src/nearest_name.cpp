// Names that are set but not in the knob table: whose they may be (Apache Spark's), and "did
// you mean", the known name a mistyped SPARK_* / SPARKNET_* variable most likely meant. One
// rule for libspark and the launcher (sparkrun warns at launch and in --print-config).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <string>
#include <vector>

#include "spark/config/config.hpp"

namespace spark::config {
namespace {

constexpr std::string_view kPrefixes[] = {"SPARKNET_", "SPARK_"};  // longest first

// The part after SPARK_ / SPARKNET_: the prefixes are interchangeable (SPARK_ROCE_TIMEOUT_MS
// means SPARKNET_ROCE_TIMEOUT_MS), so names are compared by what follows them.
std::string_view stem(std::string_view name) {
  for (std::string_view prefix : kPrefixes)
    if (name.starts_with(prefix)) return name.substr(prefix.size());
  return name;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// How many edits a name may be from a knob and still be called a typo of it: one for short
// stems (LOG, HOST), up to three for long ones (ROCE_TIMEOUT -> ROCE_TIMEOUT_MS).
std::size_t allowed_edits(std::string_view known_stem) {
  return std::clamp<std::size_t>(known_stem.size() / 4, 1, 3);
}

// Apache Spark's variables (spark-env.sh, its launch scripts): another program's, not typos.
// A trailing '_' makes a prefix; exact names where a prefix would hide a typo of ours
// (SPARK_LOCAL_RANK, SPARK_LOG).
constexpr std::string_view kOtherPrograms[] = {
    "SPARK_HOME",          "SPARK_CONF_DIR",       "SPARK_LOCAL_IP",
    "SPARK_LOCAL_DIRS",    "SPARK_LOCAL_HOSTNAME", "SPARK_PUBLIC_DNS",
    "SPARK_CLASSPATH",     "SPARK_DIST_CLASSPATH", "SPARK_LOG_DIR",
    "SPARK_LOG_MAX_FILES", "SPARK_PID_DIR",        "SPARK_IDENT_STRING",
    "SPARK_NICENESS",      "SPARK_NO_DAEMONIZE",   "SPARK_SCALA_VERSION",
    "SPARK_ENV_LOADED",    "SPARK_SUBMIT_OPTS",    "SPARK_PRINT_LAUNCH_COMMAND",
    "SPARK_USER",          "SPARK_MASTER_",        "SPARK_WORKER_",
    "SPARK_EXECUTOR_",     "SPARK_DRIVER_",        "SPARK_DAEMON_",
    "SPARK_HISTORY_",      "SPARK_YARN_",
};

}  // namespace

std::span<const std::string_view> other_programs_names() noexcept {
  return kOtherPrograms;
}

bool is_other_programs_name(std::string_view name) noexcept {
  for (std::string_view other : kOtherPrograms)
    if (other.ends_with('_') ? name.starts_with(other) : name == other) return true;
  return false;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows of the optimal-string-alignment table: i-2, i-1, i.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

const Knob* nearest_knob(std::string_view name) {
  const std::string wanted = upper(name);
  const Knob* best = nullptr;
  std::size_t best_distance = 0;
  bool best_same_prefix = false;
  for (const Knob& knob : knobs()) {
    if (knob.kind == KnobType::refused) continue;              // never suggest a removed variable
    if (stem(knob.name).size() == knob.name.size()) continue;  // torchrun's names
    if (knob.name == wanted) return &knob;                     // only the case differed
    const std::size_t distance =
        std::min(edit_distance(stem(wanted), stem(knob.name)), edit_distance(wanted, knob.name));
    if (distance > allowed_edits(stem(knob.name))) continue;
    // Nearest first; between equals the one with the name's own prefix, then table order.
    const bool same_prefix =
        wanted.size() - stem(wanted).size() == knob.name.size() - stem(knob.name).size();
    if (best == nullptr || distance < best_distance ||
        (distance == best_distance && same_prefix && !best_same_prefix)) {
      best = &knob;
      best_distance = distance;
      best_same_prefix = same_prefix;
    }
  }
  return best;
}

std::string unknown_name_warning(std::string_view name) {
  if (const Knob* near = nearest_knob(name))
    return fmt::format("{} is not a sparkrun setting (did you mean {}?)", name, near->name);
  return fmt::format(
      "{} is not a sparkrun setting; it is ignored (sparkrun --print-config lists them)", name);
}

}  // namespace spark::config
