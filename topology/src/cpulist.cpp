#include "spark/topo/cpulist.hpp"

#include <algorithm>
#include <charconv>

#include "spark/topo/error.hpp"

namespace spark::topo {

std::string format_cpu_list(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

namespace {

// Largest cpu number accepted; Linux's CONFIG_NR_CPUS tops out at 8192.
constexpr int kMaxCpu = 8191;

int parse_number(std::string_view part, std::string_view text, std::string_view what) {
  int value = -1;
  auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
  if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || value < 0 ||
      value > kMaxCpu) {
    throw TopologyError(std::string(what) + " \"" + std::string(text) + "\": \"" +
                        std::string(part) + "\" is not a cpu number (0.." +
                        std::to_string(kMaxCpu) + "); write e.g. \"0-3,8\"");
  }
  return value;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text, std::string_view what) {
  if (text.empty()) {
    throw TopologyError(std::string(what) + " is empty; write cpu numbers such as \"0-3,8\"");
  }
  std::vector<int> cpus;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      cpus.push_back(parse_number(item, text, what));
    } else {
      int lo = parse_number(item.substr(0, dash), text, what);
      int hi = parse_number(item.substr(dash + 1), text, what);
      if (hi < lo) {
        throw TopologyError(std::string(what) + " \"" + std::string(text) + "\": range \"" +
                            std::string(item) + "\" runs backwards; write low-high");
      }
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace spark::topo
