// The one exception type of spark::topo. Kept independent of libspark (topology sits below it
// in the dependency order); callers catch it or std::exception.
#pragma once

#include <stdexcept>

namespace spark::topo {

/// A topology that cannot be loaded, or a binding request that cannot be met. what() names
/// the problem and what to do about it.
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace spark::topo
