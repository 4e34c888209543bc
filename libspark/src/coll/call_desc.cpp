#include "coll/call_desc.hpp"

#include "spark/types.hpp"

namespace spark {

const char* coll_name(transport::Coll coll) noexcept {
  using transport::Coll;
  switch (coll) {
    case Coll::allreduce:
      return "allreduce";
    case Coll::reduce_scatter:
      return "reduce_scatter";
    case Coll::allgather:
      return "allgather";
    case Coll::broadcast:
      return "broadcast";
    case Coll::alltoall:
      return "alltoall";
    case Coll::alltoallv:
      return "alltoallv";
    case Coll::sendrecv:
      return "send/recv";
    case Coll::barrier:
      return "barrier";
    case Coll::none:
      break;
  }
  return "?";
}

std::string describe(const transport::CallDesc& call) {
  using transport::Coll;
  std::string s = coll_name(call.coll);
  if (call.coll == Coll::barrier) return s + "()";
  s += "(";
  s += to_string(static_cast<DType>(call.dtype));
  if (call.coll == Coll::allreduce || call.coll == Coll::reduce_scatter) {
    s += ", ";
    s += to_string(static_cast<ReduceOp>(call.op));
  }
  s += ", count " + std::to_string(call.count);
  if (call.coll == Coll::broadcast) s += ", root " + std::to_string(call.root);
  return s + ")";
}

}  // namespace spark
