#include "strict_parse.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "spark/protocol/number.hpp"

#include "usage_error.hpp"

namespace spark::launch {

int parse_int(std::string_view text, int min, int max, std::string_view what) {
  std::int64_t value = 0;
  switch (protocol::parse_integer(text, min, max, value)) {
    case protocol::Integer::ok:
      return static_cast<int>(value);
    case protocol::Integer::not_integer:
      throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not a whole number");
    case protocol::Integer::out_of_range:
      break;
  }
  throw UsageError(std::string(what) + ": " + std::string(text) + " is out of range (" +
                   std::to_string(min) + ".." + std::to_string(max) + ")");
}

double parse_number(std::string_view text, double min, double max, std::string_view what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::fixed);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < min ||
      value > max) {
    char range[64];
    std::snprintf(range, sizeof range, "%g to %g", min, max);
    throw UsageError(std::string(what) + ": '" + std::string(text) + "' is not a number from " +
                     range);
  }
  return value;
}

double parse_seconds(std::string_view text, std::string_view what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::fixed);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != end) {
    throw UsageError(std::string(what) + ": '" + std::string(text) +
                     "' is not a number of seconds (e.g. 30 or 0.5)");
  }
  constexpr double kYear = 365.0 * 24 * 3600;
  if (ec == std::errc::result_out_of_range || !std::isfinite(value) || value < 0 || value > kYear) {
    throw UsageError(std::string(what) + ": " + std::string(text) +
                     " is out of range (0 to 31536000 seconds)");
  }
  return value;
}

}  // namespace spark::launch
