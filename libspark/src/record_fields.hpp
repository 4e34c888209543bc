// Filling a FailureRecord on the CPU: one rule for its time stamp and its fixed-size text
// fields (cut to their capacity, always terminated), for every writer (the wait point, the tcp
// and roce relays).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

#include "spark/failure.hpp"

namespace spark {

/// Now, as the record's time_unix_ns.
inline void stamp_now(FailureRecord& r) {
  r.time_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
}

/// Copies `text` into a fixed-size field, cut to fit.
template <std::size_t N>
void set_field(char (&field)[N], std::string_view text) {
  const std::size_t n = std::min(N - 1, text.size());
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

inline void set_texts(FailureRecord& r, std::string_view lane, std::string_view op,
                      std::string_view detail) {
  set_field(r.lane, lane);
  set_field(r.op, op);
  set_field(r.detail, detail);
}

}  // namespace spark
