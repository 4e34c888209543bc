// The one-line failure report. Its wording is part of the interface: the launcher prints it
// verbatim ("sparkrun: " + line) and tests compare it exactly.
#include "spark/failure.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string_view>

namespace spark {
namespace {

// The fixed-size fields may be written by a GPU kernel: never read past the array.
std::string_view field(const char* data, std::size_t capacity) {
  return {data, strnlen(data, capacity)};
}

std::string who(std::int32_t peer) {
  return peer >= 0 ? fmt::format("rank {}", peer) : std::string("a peer");
}

}  // namespace

std::string to_string(const FailureRecord& r) {
  const auto op = field(r.op, sizeof r.op);
  const auto lane = field(r.lane, sizeof r.lane);
  const auto detail = field(r.detail, sizeof r.detail);
  const std::string on_lane = lane.empty() ? std::string() : fmt::format(" on lane {}", lane);
  const std::string paren = detail.empty() ? std::string() : fmt::format(" ({})", detail);

  std::string line = fmt::format("rank {}: {} seq {} step {}: ", r.rank,
                                 op.empty() ? std::string_view("operation") : op, r.seq, r.step);
  switch (r.cause) {
    case FailureCause::timeout:
      line += fmt::format("no data from {}{} after {} ms (timeout {} ms)", who(r.peer), on_lane,
                          r.waited_ms, r.timeout_ms);
      if (!detail.empty()) line += fmt::format(" [{}]", detail);
      break;
    case FailureCause::peer_closed:
      line += fmt::format("{} closed its connection{} after {} ms{}", who(r.peer), on_lane,
                          r.waited_ms, paren);
      break;
    case FailureCause::peer_error:
      line += fmt::format("transport error with {}{}{}", who(r.peer), on_lane, paren);
      break;
    case FailureCause::remote_abort:
      line += fmt::format("aborted because {} failed{}", r.peer >= 0 ? who(r.peer) : "another rank",
                          paren);
      break;
    case FailureCause::mismatch:
      line += fmt::format("mismatched collective with {}{}", who(r.peer), paren);
      break;
    default:
      line += fmt::format("failure (cause {}) with {}{}{}", static_cast<int>(r.cause), who(r.peer),
                          on_lane, paren);
      break;
  }
  return line;
}

}  // namespace spark
