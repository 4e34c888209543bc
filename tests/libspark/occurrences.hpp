// How often `what` occurs in `text` (e.g. a log line in captured stderr).
#pragma once
#include <string>

namespace spark::test {
inline std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}
}  // namespace spark::test
