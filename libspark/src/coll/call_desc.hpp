// Human-readable names of calls, for mismatch reports.
#pragma once

#include <string>

#include "transport/transport.hpp"

namespace spark {

const char* coll_name(transport::Coll coll) noexcept;
/// e.g. "allreduce(f32, sum, count 100)", "broadcast(f32, count 8, root 0)".
std::string describe(const transport::CallDesc& call);

}  // namespace spark
