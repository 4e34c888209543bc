#include "requests.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <spark/spark.hpp>
#include <sstream>
#include <stdexcept>

namespace spark::example {
namespace {

std::string read_all(const std::string& path) {
  if (path == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("cannot read requests from '" + path + "'");
  return {std::istreambuf_iterator<char>(f), {}};
}

}  // namespace

std::vector<Request> parse_requests(const std::string& text, std::size_t vocab) {
  std::vector<Request> out;
  std::istringstream in(text);
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "requests line " + std::to_string(n) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::invalid_argument(where + "not JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_array() || j["prompt"].empty())
      throw std::invalid_argument(where + R"(expected {"id": ..., "prompt": [token ids, ...]})");
    Request r;
    r.id = j.contains("id") ? j["id"] : nlohmann::json(out.size());
    for (const auto& t : j["prompt"]) {
      if (!t.is_number_integer() || t.get<long long>() < 0 ||
          t.get<long long>() >= static_cast<long long>(vocab))
        throw std::invalid_argument(where + "token " + t.dump() + " is not in [0, " +
                                    std::to_string(vocab) + ")");
      r.prompt.push_back(t.get<int>());
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string share_input(Communicator& comm, const std::string& path, int root) {
  std::string text;
  std::int64_t n = 0;
  if (comm.rank() == root) {
    text = read_all(path);
    n = static_cast<std::int64_t>(text.size());
  }
  comm.broadcast(&n, 1, DType::i64, root);
  text.resize(static_cast<std::size_t>(n));
  if (n > 0) comm.broadcast(text.data(), text.size(), DType::u8, root);
  return text;
}

void make_requests(const std::string& path, std::size_t count, std::size_t len, std::size_t vocab,
                   std::uint64_t seed) {
  std::ofstream f(path);
  if (!f) throw std::invalid_argument("cannot create '" + path + "'");
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (std::size_t i = 0; i < count; ++i) {
    nlohmann::json j;
    j["id"] = "req-" + std::to_string(i);
    std::vector<int> p(len / 2 + i % (len - len / 2 + 1));  // lengths vary in [len/2, len]
    for (auto& t : p) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      t = static_cast<int>((s >> 33) % vocab);
    }
    j["prompt"] = p;
    f << j.dump() << '\n';
  }
  if (!f.flush()) throw std::invalid_argument("cannot write '" + path + "'");
}

std::string result_line(const nlohmann::json& id, const std::vector<int>& tokens,
                        std::uint64_t logits_fnv) {
  char hx[17];
  std::snprintf(hx, sizeof hx, "%016llx", static_cast<unsigned long long>(logits_fnv));
  return nlohmann::json{{"id", id}, {"tokens", tokens}, {"logits_fnv", hx}}.dump();
}

bool is_result_line(const Request& r, std::size_t new_tokens, const std::string& line) {
  const auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array() ||
      j["tokens"].size() != new_tokens || !j.contains("logits_fnv") ||
      !j["logits_fnv"].is_string() || j["logits_fnv"].get<std::string>().size() != 16)
    return false;
  std::vector<int> tokens;
  for (const auto& t : j["tokens"]) {
    if (!t.is_number_integer()) return false;
    tokens.push_back(t.get<int>());
  }
  const std::string hx = j["logits_fnv"].get<std::string>();
  char* end = nullptr;
  const auto fnv = std::strtoull(hx.c_str(), &end, 16);
  return end == hx.c_str() + hx.size() && result_line(r.id, tokens, fnv) == line;
}

}  // namespace spark::example
