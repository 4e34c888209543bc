// The one strict integer parser of the project (launcher options, knob values, SLURM
// variables, tools' arguments): the whole text is a decimal integer, "" is not 0, "12x" is
// not 12, "+1" and " 1" are refused. Callers word the error for their input.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace spark::protocol {

enum class Integer { ok, not_integer, out_of_range };

/// Parses `text` into `value` when it is a decimal integer in [min, max].
inline Integer parse_integer(std::string_view text, std::int64_t min, std::int64_t max,
                             std::int64_t& value) {
  const char* end = text.data() + text.size();
  std::int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) return Integer::not_integer;
  if (ec == std::errc::result_out_of_range || v < min || v > max) return Integer::out_of_range;
  value = v;
  return Integer::ok;
}

}  // namespace spark::protocol
