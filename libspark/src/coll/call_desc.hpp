// The collectives' identity on the wire: which call a message belongs to (the collective, its
// dtype, op, root and count), carried as the header's 16 call bytes (transport.hpp) so that a
// receiver detects ranks that called different collectives, and named in mismatch reports.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include "transport/transport.hpp"

namespace spark {

// X(enumerator, name in reports): one line per collective.
#define SPARK_COLLECTIVES(X)          \
  X(allreduce, "allreduce")           \
  X(reduce_scatter, "reduce_scatter") \
  X(allgather, "allgather")           \
  X(broadcast, "broadcast")           \
  X(alltoall, "alltoall")             \
  X(alltoallv, "alltoallv")           \
  X(sendrecv, "send/recv")            \
  X(barrier, "barrier")

/// Which collective a message belongs to (part of every message, for mismatch detection).
enum class Coll : std::uint8_t {
  none = 0,
#define SPARK_COLL_ENUM(e, name) e,
  SPARK_COLLECTIVES(SPARK_COLL_ENUM)
#undef SPARK_COLL_ENUM
};

/// The call a message belongs to: enough to name it in a mismatch report.
struct CallDesc {
  Coll coll = Coll::none;
  std::uint8_t dtype = 0;  ///< spark::DType
  std::uint8_t op = 0;     ///< spark::ReduceOp (0 when not a reduction)
  std::uint8_t pad = 0;
  std::int32_t root = -1;   ///< broadcast root, -1 otherwise
  std::uint64_t count = 0;  ///< element count as the sender sees it for this pair
  bool operator==(const CallDesc&) const = default;

  transport::CallBytes bytes() const noexcept { return std::bit_cast<transport::CallBytes>(*this); }
  static CallDesc from(const transport::CallBytes& b) noexcept {
    return std::bit_cast<CallDesc>(b);
  }
};
static_assert(sizeof(CallDesc) == sizeof(transport::CallBytes));

const char* coll_name(Coll coll) noexcept;
/// e.g. "allreduce(f32, sum, count 100)", "broadcast(f32, count 8, root 0)".
std::string describe(const CallDesc& call);

}  // namespace spark
