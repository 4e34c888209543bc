#include "slurm_hostlist.hpp"

#include <cstdint>
#include <string>

#include "spark/protocol/number.hpp"

namespace spark::launch::slurm {
namespace {

struct Range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  std::size_t width = 0;  // digits of the lower bound as written: the zero padding
};

// One entry "pre[1-2]mid[3]suf" is a sequence of parts: literal text or a bracket group.
struct Part {
  std::string literal;        // used when ranges is empty
  std::vector<Range> ranges;  // a bracket group
};

[[noreturn]] void fail(std::string_view what, std::string_view text, const std::string& why) {
  throw SlurmError(std::string(what) + " '" + std::string(text) + "' is malformed: " + why +
                   " (expected e.g. 'spark[1-3,5]' or 'a,b[01-02]')");
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_host_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
         c == '_';
}

// Host numbers beyond 9 digits are not host names but typos; this also keeps sums in range.
constexpr std::size_t kMaxDigits = 9;

std::uint64_t parse_number(std::string_view digits, std::string_view what, std::string_view text) {
  if (digits.empty()) fail(what, text, "empty number in a range");
  if (digits.size() > kMaxDigits) fail(what, text, "number '" + std::string(digits) + "' too long");
  std::int64_t value = 0;
  if (protocol::parse_integer(digits, 0, INT64_MAX, value) != protocol::Integer::ok)
    fail(what, text, "'" + std::string(digits) + "' is not a number");
  return static_cast<std::uint64_t>(value);
}

std::vector<Range> parse_group(std::string_view body, std::string_view what,
                               std::string_view text) {
  if (body.empty()) fail(what, text, "empty brackets");
  std::vector<Range> ranges;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = body.find(',', start);
    const std::string_view item = body.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) fail(what, text, "empty range inside brackets");
    Range r;
    const std::size_t dash = item.find('-');
    const std::string_view lo = item.substr(0, dash);
    r.lo = parse_number(lo, what, text);
    r.width = lo.size();
    if (dash == std::string_view::npos) {
      r.hi = r.lo;
    } else {
      r.hi = parse_number(item.substr(dash + 1), what, text);
      if (r.hi < r.lo) fail(what, text, "range '" + std::string(item) + "' runs backwards");
    }
    ranges.push_back(r);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return ranges;
}

std::vector<Part> parse_entry(std::string_view entry, std::string_view what,
                              std::string_view text) {
  if (entry.empty())
    fail(what, text, "empty entry (two commas in a row, or a leading/trailing comma)");
  std::vector<Part> parts;
  std::size_t i = 0;
  while (i < entry.size()) {
    if (entry[i] == '[') {
      const std::size_t close = entry.find(']', i);
      if (close == std::string_view::npos) fail(what, text, "'[' without ']'");
      const std::string_view body = entry.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string_view::npos) fail(what, text, "nested '['");
      parts.push_back(Part{{}, parse_group(body, what, text)});
      i = close + 1;
    } else if (entry[i] == ']') {
      fail(what, text, "']' without '['");
    } else {
      const std::size_t begin = i;
      while (i < entry.size() && entry[i] != '[' && entry[i] != ']') {
        if (!is_host_char(entry[i])) {
          fail(what, text,
               std::string("character '") + entry[i] + "' is not allowed in a host name");
        }
        ++i;
      }
      parts.push_back(Part{std::string(entry.substr(begin, i - begin)), {}});
    }
  }
  return parts;
}

// Splits at commas outside brackets ("a[1,2],b" -> "a[1,2]", "b").
std::vector<std::string_view> split_top_level(std::string_view text, std::string_view what) {
  std::vector<std::string_view> entries;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '[') {
      if (++depth > 1) fail(what, text, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) fail(what, text, "']' without '['");
    } else if (c == ',' && depth == 0) {
      entries.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) fail(what, text, "'[' without ']'");
  entries.push_back(text.substr(start));
  return entries;
}

std::string pad(std::uint64_t value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view text, std::string_view what) {
  if (text.empty()) fail(what, text, "empty");
  std::vector<std::string> hosts;
  for (std::string_view entry : split_top_level(text, what)) {
    const std::vector<Part> parts = parse_entry(entry, what, text);
    // Count first so that a huge product is refused before anything is allocated.
    std::size_t count = 1;
    for (const Part& part : parts) {
      if (part.ranges.empty()) continue;
      std::size_t group = 0;
      for (const Range& r : part.ranges) group += static_cast<std::size_t>(r.hi - r.lo + 1);
      if (group > kMaxHosts || count * group > kMaxHosts - hosts.size()) {
        fail(what, text, "expands to more than " + std::to_string(kMaxHosts) + " hosts");
      }
      count *= group;
    }
    // Product over the groups, leftmost slowest: grow the prefixes part by part.
    std::vector<std::string> names{""};
    for (const Part& part : parts) {
      std::vector<std::string> next;
      if (part.ranges.empty()) {
        for (std::string& name : names) next.push_back(std::move(name) + part.literal);
      } else {
        for (const std::string& name : names) {
          for (const Range& r : part.ranges) {
            for (std::uint64_t v = r.lo; v <= r.hi; ++v) next.push_back(name + pad(v, r.width));
          }
        }
      }
      names = std::move(next);
    }
    hosts.insert(hosts.end(), names.begin(), names.end());
  }
  return hosts;
}

std::vector<int> expand_counts(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) -> void {
    throw SlurmError(std::string(what) + " '" + std::string(text) + "' is malformed: " + why +
                     " (expected e.g. '2(x3),1')");
  };
  auto number = [&](std::string_view digits) -> int {
    std::int64_t value = 0;
    if (digits.size() > kMaxDigits ||
        protocol::parse_integer(digits, 0, INT32_MAX, value) != protocol::Integer::ok) {
      bad("'" + std::string(digits) + "' is not a count");
    }
    return static_cast<int>(value);
  };
  if (text.empty()) bad("empty");
  std::vector<int> counts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) bad("empty entry");
    const std::size_t paren = item.find('(');
    const int value = number(item.substr(0, paren));
    int repeat = 1;
    if (paren != std::string_view::npos) {
      const std::string_view rest = item.substr(paren);  // "(xR)"
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') {
        bad("'" + std::string(item) + "' is neither 'N' nor 'N(xR)'");
      }
      repeat = number(rest.substr(2, rest.size() - 3));
      if (repeat < 1) bad("repeat count in '" + std::string(item) + "' must be at least 1");
    }
    if (counts.size() + static_cast<std::size_t>(repeat) > kMaxHosts) {
      bad("more than " + std::to_string(kMaxHosts) + " nodes");
    }
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return counts;
}

}  // namespace spark::launch::slurm
