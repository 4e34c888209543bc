// The safetensors header of a model file (examples/inference): 8-byte length, JSON
// header, data section. A file is outside input: a bad one is a SafetensorsError naming it.
// The input is handed over as a memfd, so the real mmap-based reader runs unchanged.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int fd = ::memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) __builtin_trap();
  try {
    spark::example::SafetensorsFile f("/proc/self/fd/" + std::to_string(fd));
    (void)f.metadata();
  } catch (const spark::example::SafetensorsError&) {
  }
  ::close(fd);
  return 0;
}
