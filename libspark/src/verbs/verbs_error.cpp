#include "verbs/verbs_error.hpp"

#include <cstdio>
#include <cstring>

namespace spark::verbs {

std::string call_failed(std::string_view call, std::string_view device, int err) {
  std::string msg(call);
  msg += " on ";
  msg += device.empty() ? std::string_view("(no device)") : device;
  msg += " failed: ";
  msg += err != 0 ? std::strerror(err) : "unknown error";
  msg += " (errno " + std::to_string(err) + ")";
  return msg;
}

void throw_call(std::string_view call, std::string_view device, int err) {
  throw VerbsError(call_failed(call, device, err));
}

void log_destroy_failure(std::string_view call, std::string_view device, int err) noexcept {
  // Destructors must not throw: say what leaked and carry on.
  std::fprintf(stderr, "spark verbs: %.*s on %.*s failed: %s (errno %d)\n",
               static_cast<int>(call.size()), call.data(), static_cast<int>(device.size()),
               device.data(), std::strerror(err), err);
}

}  // namespace spark::verbs
