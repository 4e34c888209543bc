// The one error type of the launcher's front end: bad command-line input. main() prints it
// and exits 2 before anything is started.
#pragma once

#include <stdexcept>
#include <string>

namespace spark::launch {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace spark::launch
