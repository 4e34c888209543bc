// SPARK_TRACE: a Chrome/Perfetto trace per rank (PATH.rank<R>.json; sparkrun may merge them
// into PATH). One complete event per operation (thread "ops") and one per wait that had to
// wait (thread "waits": peer, lane, seq, step). Events are buffered in memory and written at
// the end, and before a failure is reported (so a failed run shows where each rank waited).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace spark {

class Trace {
 public:
  Trace(const std::string& path, int rank);
  ~Trace();  // writes the file
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  using Clock = std::chrono::steady_clock;
  void op(const char* name, std::uint64_t seq, std::uint64_t bytes, Clock::time_point begin,
          Clock::time_point end, bool failed) noexcept;
  void wait(const char* op, std::uint64_t seq, std::uint32_t step, int peer,
            const std::string& lane, const char* what, Clock::time_point begin,
            Clock::time_point end) noexcept;
  void failure(const std::string& line) noexcept;
  /// Writes everything recorded so far (idempotent; later events are appended on the next call).
  void flush() noexcept;
  const std::string& file() const noexcept { return file_; }

 private:
  double us(Clock::time_point t) const noexcept;
  void add(std::string event) noexcept;

  std::string file_;
  int rank_;
  Clock::time_point origin_;
  std::int64_t origin_unix_us_;
  std::mutex mu_;
  std::vector<std::string> events_;
  std::size_t dropped_ = 0;
};

}  // namespace spark
