// The one strict integer parser of the project (launcher options, knob values, SLURM
// variables, tools' arguments): the whole text is a decimal integer, "" is not 0, "12x" is
// not 12, "+1" and " 1" are refused. Callers word the error for their input.
#pragma once

#include <charconv>
#include <cstdint>
#include <string_view>

namespace spark::protocol {

enum class Integer { ok, not_integer, out_of_range };

namespace detail {
template <class T>
Integer parse_decimal(std::string_view text, T min, T max, T& value) {
  const char* end = text.data() + text.size();
  T v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) return Integer::not_integer;
  if (ec == std::errc::result_out_of_range || v < min || v > max) return Integer::out_of_range;
  value = v;
  return Integer::ok;
}
}  // namespace detail

/// Parses `text` into `value` when it is a decimal integer in [min, max].
inline Integer parse_integer(std::string_view text, std::int64_t min, std::int64_t max,
                             std::int64_t& value) {
  return detail::parse_decimal(text, min, max, value);
}
/// The same for the full unsigned 64-bit range (addresses, random cookies): "-1" is not an
/// integer here either.
inline Integer parse_unsigned(std::string_view text, std::uint64_t min, std::uint64_t max,
                              std::uint64_t& value) {
  return detail::parse_decimal(text, min, max, value);
}

}  // namespace spark::protocol
