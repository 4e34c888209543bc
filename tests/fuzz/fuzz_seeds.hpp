// Seed corpus support for the harnesses: `SPARK_FUZZ_WRITE_SEEDS=DIR harness` writes seeds
// made by the real encoders into DIR and exits (how tests/fuzz/corpus/ was made; see
// tests/fuzz/README.md), so a wire format change is one regenerated corpus, not hand edits.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

namespace spark::fuzz {

inline void write_seed(const char* dir, const std::string& name, std::string_view bytes) {
  std::ofstream out(std::string(dir) + "/" + name, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write seed %s/%s\n", dir, name.c_str());
    std::exit(1);
  }
}

/// Runs `write` and exits when SPARK_FUZZ_WRITE_SEEDS names a folder.
template <typename F>
void seeds_requested(F write) {
  if (const char* dir = std::getenv("SPARK_FUZZ_WRITE_SEEDS")) {
    write(dir);
    std::exit(0);
  }
}

}  // namespace spark::fuzz
