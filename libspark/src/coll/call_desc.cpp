#include "coll/call_desc.hpp"

#include "spark/types.hpp"

namespace spark {

const char* coll_name(Coll coll) noexcept {
  switch (coll) {
#define SPARK_COLL_NAME(e, name) \
  case Coll::e:                  \
    return name;
    SPARK_COLLECTIVES(SPARK_COLL_NAME)
#undef SPARK_COLL_NAME
    case Coll::none:
      break;
  }
  return "?";
}

std::string describe(const CallDesc& call) {
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
