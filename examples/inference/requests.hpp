// The request and result format both inference examples read and write: one JSON object per
// line in ({"id": ..., "prompt": [token ids]}), one per line out ({"id", "tokens",
// "logits_fnv"}), and the random request generator (--make-requests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace spark {
class Communicator;
}

namespace spark::example {

struct Request {
  nlohmann::json id;
  std::vector<int> prompt;
};

/// Parses JSONL requests; errors name the line and the rule (std::invalid_argument).
std::vector<Request> parse_requests(const std::string& text, std::size_t vocab);

/// Rank `root` reads the requests (a file, or its stdin for "-": sparkrun gives stdin to rank 0
/// only) and broadcasts the text over comm.
std::string share_input(Communicator& comm, const std::string& path, int root = 0);

/// Writes `count` random requests (prompt lengths in [len/2, len]) to path.
void make_requests(const std::string& path, std::size_t count, std::size_t len, std::size_t vocab,
                   std::uint64_t seed);

/// One result line (no newline): {"id":...,"logits_fnv":"<16 hex>","tokens":[...]}.
std::string result_line(const nlohmann::json& id, const std::vector<int>& tokens,
                        std::uint64_t logits_fnv);

/// Whether line is exactly what result_line writes for request r with new_tokens tokens (how a
/// resumed output's lines are checked).
bool is_result_line(const Request& r, std::size_t new_tokens, const std::string& line);

}  // namespace spark::example
