// The settings record every rank publishes at wire-up (libspark/src/comm/settings_digest.hpp)
// and every other rank decodes and compares. Input: byte 0 splits the rest into two ranks'
// records. Anything malformed must be a BootstrapError naming the rank; an accepted record
// must be exactly what encode() writes for it; the verdict over the two must be nullopt when
// they are equal, and a line must name both ranks (it compares by name: two records that
// differ only in order have none).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/settings_digest.hpp"
#include "fuzz_seeds.hpp"
#include "spark/error.hpp"

namespace digest = spark::settings_digest;

namespace {

std::string as_text(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

void write_seeds(const char* dir) {
  const digest::Settings a = {
      {digest::kVersion, "1.0.0"}, {"SPARK_TCP_LANES", "2"}, {"SPARK_JOB_ID", ""}};
  digest::Settings b = a;
  b[1].second = "4";
  const auto ea = digest::encode(0, a), eb = digest::encode(1, b);
  spark::fuzz::write_seed(
      dir, "same",
      std::string(1, static_cast<char>(ea.size())) + as_text(ea) + as_text(digest::encode(1, a)));
  spark::fuzz::write_seed(dir, "differ",
                          std::string(1, static_cast<char>(ea.size())) + as_text(ea) + as_text(eb));
}

std::optional<digest::Settings> decoded(int rank, std::span<const std::byte> bytes) {
  digest::Settings s;
  try {
    s = digest::decode(rank, bytes);
  } catch (const spark::BootstrapError& e) {
    if (std::string(e.what()).find("rank " + std::to_string(rank) + "'s") == std::string::npos)
      __builtin_trap();
    return std::nullopt;
  }
  const auto again = digest::encode(rank, s);
  if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0)
    __builtin_trap();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  spark::fuzz::seeds_requested(write_seeds);
  if (size < 1) return 0;
  const std::span<const std::byte> rest(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const std::size_t split = data[0] < rest.size() ? data[0] : rest.size();
  const auto a = decoded(0, rest.first(split));
  const auto b = decoded(1, rest.subspan(split));
  if (!a || !b) return 0;
  const std::vector<digest::Settings> both = {*a, *b};
  const std::vector<std::string> nodes = {"host-a", "host-b"};
  const auto line = digest::verdict(both, nodes);
  if (line && *a == *b) __builtin_trap();
  if (line &&
      (line->find("rank 0") == std::string::npos || line->find("rank 1") == std::string::npos))
    __builtin_trap();
  return 0;
}
