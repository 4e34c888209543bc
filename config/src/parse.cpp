// Strict parsing of single knob values. Every refusal names the variable, the value and what
// would be accepted; "" never becomes 0 and "12x" never becomes 12.
#include <fmt/format.h>

#include "messages.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

namespace spark::config {

std::string valid_text(const Knob& knob) {
  std::string text;
  switch (knob.kind) {
    case KnobType::integer:
      text = fmt::format("an integer in {}..{}", knob.min, knob.max);
      break;
    case KnobType::milliseconds:
      text = fmt::format("milliseconds in {}..{}", knob.min, knob.max);
      break;
    case KnobType::choice:
      text = std::string(knob.choices);
      break;
    case KnobType::string:
      text = fmt::format("a non-empty {}", knob.type);
      break;
    case KnobType::path:
      text = "a non-empty path";
      break;
    case KnobType::host_port:
      text = "HOST:PORT with PORT in 1..65535";
      break;
    case KnobType::port_range:
      text = "FIRST-LAST or one PORT, ports in 1..65535 (e.g. 50000-50063)";
      break;
    case KnobType::refused:
      text = "unset";
      break;
    case KnobType::unchecked:
      text = "any value";
      break;
  }
  if (!knob.default_value.empty()) {
    text += fmt::format(", default {}", knob.default_value);
  }
  return text;
}

std::string refusal(const Knob& knob, std::string_view value, std::string_view reason) {
  return fmt::format("{}=\"{}\" is refused: {}; valid: {}", knob.name, value, reason,
                     valid_text(knob));
}

std::string_view empty_reason(const Knob& knob) {
  return knob.default_value.empty() ? "empty value (unset the variable instead)"
                                    : "empty value (unset the variable to use the default)";
}

std::int64_t parse_integer(const Knob& knob, std::string_view value) {
  if (value.empty()) throw ConfigError(refusal(knob, value, empty_reason(knob)));
  std::int64_t result = 0;
  switch (protocol::parse_integer(value, knob.min, knob.max, result)) {
    case protocol::Integer::ok:
      return result;
    case protocol::Integer::not_integer:
      throw ConfigError(refusal(knob, value, "not a decimal integer"));
    case protocol::Integer::out_of_range:
      break;
  }
  throw ConfigError(refusal(knob, value, "out of range"));
}

std::string_view parse_choice(const Knob& knob, std::string_view value) {
  if (value.empty()) throw ConfigError(refusal(knob, value, empty_reason(knob)));
  std::string_view rest = knob.choices;
  while (!rest.empty()) {
    const auto bar = rest.find('|');
    const auto word = rest.substr(0, bar);
    if (word == value) return word;
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  throw ConfigError(refusal(knob, value, "not one of the accepted values"));
}

std::pair<int, int> parse_port_range(const Knob& knob, std::string_view value) {
  if (value.empty()) throw ConfigError(refusal(knob, value, empty_reason(knob)));
  const auto dash = value.find('-');
  const auto first_text = value.substr(0, dash);
  const auto last_text = dash == std::string_view::npos ? first_text : value.substr(dash + 1);
  std::int64_t first = 0, last = 0;
  if (protocol::parse_integer(first_text, 1, 65535, first) != protocol::Integer::ok ||
      protocol::parse_integer(last_text, 1, 65535, last) != protocol::Integer::ok)
    throw ConfigError(refusal(knob, value, "not a port or a range of ports"));
  if (first > last) throw ConfigError(refusal(knob, value, "the first port is above the last"));
  return {static_cast<int>(first), static_cast<int>(last)};
}

std::string refused_variable_message(const Knob& knob, std::string_view value) {
  if (knob.name == "SPARKNET_ROCE_SPIN_LIMIT") {
    return fmt::format(
        "SPARKNET_ROCE_SPIN_LIMIT is set (\"{}\") but is no longer supported: it counted polls "
        "and was replaced by SPARKNET_ROCE_TIMEOUT_MS, in milliseconds (default 10000). Do not "
        "copy the old value over: unset SPARKNET_ROCE_SPIN_LIMIT and, if the default does not "
        "fit, set SPARKNET_ROCE_TIMEOUT_MS to a number of milliseconds",
        value);
  }
  return fmt::format(
      "{} is set (\"{}\") but this option was removed and has no replacement: unset {}", knob.name,
      value, knob.name);
}

}  // namespace spark::config
