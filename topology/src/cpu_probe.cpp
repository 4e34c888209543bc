// Reads per-cpu facts the kernel exposes but old hwloc does not turn into correct cpukinds.
#include <charconv>
#include <fstream>
#include <string>
#include <string_view>

#include "spark/topo/kinds.hpp"

namespace spark::topo {

namespace {

bool parse_unsigned(std::string_view text, unsigned& out, int base) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  if (base == 16) {
    if (text.size() < 3 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) return false;
    text.remove_prefix(2);
  }
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

bool read_number_file(const std::filesystem::path& path, unsigned& out) {
  std::ifstream in(path);
  std::string line;
  return in && std::getline(in, line) && parse_unsigned(line, out, 10);
}

// "key\t: value" -> key, value (trimmed); false for lines without ':'.
bool split_field(const std::string& line, std::string_view& key, std::string_view& value) {
  auto colon = line.find(':');
  if (colon == std::string::npos) return false;
  key = std::string_view(line).substr(0, colon);
  while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.remove_suffix(1);
  value = std::string_view(line).substr(colon + 1);
  return true;
}

}  // namespace

CpuProbe read_cpu_probe(const std::filesystem::path& root) {
  CpuProbe probe;
  // /proc/cpuinfo on arm64 has one block per cpu: "processor : N" ... "CPU part : 0xd85".
  std::ifstream cpuinfo(root / "proc/cpuinfo");
  std::string line;
  int current = -1;
  while (std::getline(cpuinfo, line)) {
    std::string_view key, value;
    if (!split_field(line, key, value)) continue;
    unsigned number = 0;
    if (key == "processor") {
      current = parse_unsigned(value, number, 10) ? static_cast<int>(number) : -1;
    } else if (key == "CPU part" && current >= 0 && parse_unsigned(value, number, 16)) {
      probe.midr_part[current] = number;
    }
  }

  std::error_code ec;
  const auto cpu_dir = root / "sys/devices/system/cpu";
  for (const auto& entry : std::filesystem::directory_iterator(cpu_dir, ec)) {
    const std::string name = entry.path().filename().string();
    unsigned cpu = 0;
    if (name.size() < 4 || name.compare(0, 3, "cpu") != 0 ||
        !parse_unsigned(std::string_view(name).substr(3), cpu, 10)) {
      continue;
    }
    unsigned value = 0;
    if (read_number_file(entry.path() / "cpu_capacity", value)) probe.capacity[cpu] = value;
    if (read_number_file(entry.path() / "cpufreq/cpuinfo_max_freq", value)) {
      probe.max_mhz[cpu] = value / 1000;  // kHz -> MHz
    }
  }
  return probe;
}

}  // namespace spark::topo
