// Errors from the verbs layer: every failed call is reported with the call, the device and
// the errno text, so that a user can tell which NIC and which step failed.
#pragma once

#include <string>
#include <string_view>

#include "spark/error.hpp"

namespace spark::verbs {

/// A verbs call failed (or no RDMA device / resource is usable). what() names the call, the
/// device and the reason, plus a fix where one is known.
class VerbsError : public spark::Error {
 public:
  using spark::Error::Error;
};

/// "ibv_create_qp on rxe0 failed: Cannot allocate memory (errno 12)".
std::string call_failed(std::string_view call, std::string_view device, int err);

/// Throws VerbsError(call_failed(...)).
[[noreturn]] void throw_call(std::string_view call, std::string_view device, int err);

/// Logs a failure from a destructor (never throws).
void log_destroy_failure(std::string_view call, std::string_view device, int err) noexcept;

}  // namespace spark::verbs
