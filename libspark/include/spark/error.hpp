// Exceptions thrown at libspark's API boundary. Every message says what went wrong and what
// to do about it.
#pragma once

#include <stdexcept>
#include <string>

#include "spark/failure.hpp"

namespace spark {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Wrong arguments or calls in the wrong order (a programming error in the caller).
class InvalidUsage : public Error {
 public:
  using Error::Error;
};

/// A SPARK_* / SPARKNET_* environment variable or option with a value that is refused.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Ranks could not find each other (rendezvous, PMIx, join timeout).
class BootstrapError : public Error {
 public:
  using Error::Error;
};

/// The communicator has failed (fail-stop); what() is the one-line report.
class CommFailure : public Error {
 public:
  explicit CommFailure(const FailureRecord& record) : Error(to_string(record)), record_(record) {}
  const FailureRecord& record() const noexcept { return record_; }

 private:
  FailureRecord record_;
};

}  // namespace spark
