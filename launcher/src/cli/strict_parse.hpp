// Strict number parsing for command-line values: "", "abc", "12x", "1e999" and out-of-range
// values are refused with a message naming the option (never silently 0).
#pragma once

#include <string_view>

namespace spark::launch {

/// Parses a decimal integer in [min, max]; throws UsageError naming `what` otherwise.
int parse_int(std::string_view text, int min, int max, std::string_view what);

/// Parses a decimal number (e.g. "2.5") in [min, max]; throws UsageError naming `what` otherwise.
double parse_number(std::string_view text, double min, double max, std::string_view what);

/// Parses a non-negative number of seconds (decimals allowed, e.g. "0.5"); refuses
/// negative, non-finite and absurdly large values (> 1 year).
double parse_seconds(std::string_view text, std::string_view what);

}  // namespace spark::launch
