// Writes docs/configuration.md from the knob table, or checks that the file is current.
//   spark_config_doc                  print to stdout
//   spark_config_doc --output FILE    (re)write FILE
//   spark_config_doc --check FILE     exit 1 when FILE differs from what would be generated
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "config/config.hpp"

namespace {

using spark::config::Knob;
using spark::config::KnobOrigin;
using spark::config::KnobType;

// A '|' inside a cell would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string valid_values(const Knob& k) {
  switch (k.kind) {
    case KnobType::integer:
    case KnobType::milliseconds:
      return fmt::format("{}..{}", k.min, k.max);
    case KnobType::choice:
      return std::string(k.choices);
    case KnobType::host_port:
      return "HOST:PORT, PORT 1..65535";
    case KnobType::refused:
      return "must not be set";
    case KnobType::string:
      if (k.name == "SPARK_TCP_ADDR") return "dotted IPv4";
      if (k.name == "SPARK_LOG") return "error|warn|info|trace, optional :subsys,...";
      return "non-empty";
    case KnobType::path:
      return "non-empty";
  }
  return "";
}

std::string section(KnobOrigin origin) {
  switch (origin) {
    case KnobOrigin::user:
      return "Tuning and diagnostics";
    case KnobOrigin::launcher:
      return "Set by sparkrun for every rank";
    case KnobOrigin::torchrun:
      return "torchrun compatibility";
    case KnobOrigin::removed:
      return "Removed (refused when set)";
  }
  return "";
}

std::string generate() {
  std::ostringstream out;
  out << "# Configuration: environment variables\n\n"
         "<!-- GENERATED from libspark/src/config/knobs.cpp by spark_config_doc; do not edit.\n"
         "     Regenerate: cmake --build BUILD --target spark_config_doc_update -->\n\n"
         "libspark reads these variables once, when a communicator starts, into an immutable\n"
         "snapshot. Every value is parsed strictly: an empty value, trailing garbage, a negative\n"
         "or out-of-range number is refused at start-up with a message naming the variable, the\n"
         "value and the valid range (an empty variable never means 0: unset it to get the\n"
         "default). `sparkrun --print-config` prints the effective values and where each came\n"
         "from.\n";
  for (auto origin :
       {KnobOrigin::user, KnobOrigin::launcher, KnobOrigin::torchrun, KnobOrigin::removed}) {
    out << "\n## " << section(origin) << "\n\n"
        << "| Variable | Type | Default | Valid | Description |\n"
        << "| --- | --- | --- | --- | --- |\n";
    for (const Knob& k : spark::config::knobs()) {
      if (k.origin != origin) continue;
      out << fmt::format("| `{}` | {} | {} | {} | {} |\n", k.name, cell(k.type),
                         k.default_value.empty() ? "unset" : fmt::format("`{}`", k.default_value),
                         cell(valid_values(k)), cell(k.doc));
    }
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string text = generate();
  if (argc == 1) {
    std::cout << text;
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--output") {
    std::ofstream file(argv[2], std::ios::binary | std::ios::trunc);
    file << text;
    if (!file) {
      std::cerr << "spark_config_doc: cannot write " << argv[2] << "\n";
      return 1;
    }
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--check") {
    std::ifstream file(argv[2], std::ios::binary);
    std::ostringstream current;
    current << file.rdbuf();
    if (!file || current.str() != text) {
      std::cerr << "spark_config_doc: " << argv[2]
                << " is out of date with the knob table (libspark/src/config/knobs.cpp); "
                   "regenerate it: cmake --build BUILD --target spark_config_doc_update\n";
      return 1;
    }
    return 0;
  }
  std::cerr << "usage: spark_config_doc [--output FILE | --check FILE]\n";
  return 2;
}
