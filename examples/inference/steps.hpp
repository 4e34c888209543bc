// The rows of one forward step, as both inference examples build them: a batch's prefill (every
// prompt token, logits of each last one) and a decode step (the token just generated, one row
// per request); the greedy pick and the FNV-1a hash chained over every logits vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "requests.hpp"

namespace spark::example {

/// forward()'s inputs: token, position, KV-cache slot and "want logits" per row.
struct Rows {
  std::vector<int> tokens, positions, slots;
  std::vector<char> want_logits;
};

/// Requests [first, first+count): request first+i in slot i.
Rows prefill_rows(const std::vector<Request>& requests, std::size_t first, std::size_t count);
/// The longest prompt of requests [first, first+count): the KV cache's length for a batch.
std::size_t longest_prompt(const std::vector<Request>& requests, std::size_t first,
                           std::size_t count);
/// One decode step after `step` generated tokens: request first+i feeds last[i] at position
/// prompt length + step - 1.
Rows decode_rows(const std::vector<Request>& requests, std::size_t first,
                 const std::vector<int>& last, std::size_t step);

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
/// FNV-1a over the bytes of n floats, continuing from h.
std::uint64_t fnv(std::uint64_t h, const float* p, std::size_t n);
/// The index of the largest logit (the first on ties).
int greedy(const float* logits, std::size_t vocab);

}  // namespace spark::example
