#include "steps.hpp"

#include <algorithm>

namespace spark::example {

std::size_t longest_prompt(const std::vector<Request>& requests, std::size_t first,
                           std::size_t count) {
  std::size_t longest = 0;
  for (std::size_t i = 0; i < count; ++i)
    longest = std::max(longest, requests[first + i].prompt.size());
  return longest;
}

Rows prefill_rows(const std::vector<Request>& requests, std::size_t first, std::size_t count) {
  Rows r;
  for (std::size_t i = 0; i < count; ++i) {
    const auto& p = requests[first + i].prompt;
    for (std::size_t j = 0; j < p.size(); ++j) {
      r.tokens.push_back(p[j]);
      r.positions.push_back(static_cast<int>(j));
      r.slots.push_back(static_cast<int>(i));
      r.want_logits.push_back(j + 1 == p.size());
    }
  }
  return r;
}

Rows decode_rows(const std::vector<Request>& requests, std::size_t first,
                 const std::vector<int>& last, std::size_t step) {
  Rows r;
  for (std::size_t i = 0; i < last.size(); ++i) {
    r.tokens.push_back(last[i]);
    r.positions.push_back(static_cast<int>(requests[first + i].prompt.size() + step - 1));
    r.slots.push_back(static_cast<int>(i));
    r.want_logits.push_back(1);
  }
  return r;
}

std::uint64_t fnv(std::uint64_t h, const float* p, std::size_t n) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

int greedy(const float* logits, std::size_t vocab) {
  return static_cast<int>(std::max_element(logits, logits + vocab) - logits);
}

}  // namespace spark::example
