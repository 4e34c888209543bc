// Splits one rank's output stream into whole lines and hands each line, with its optional
// "[rank]" tag and timestamp, to a sink in one piece. Lines of different ranks therefore
// never mix, even though each stream arrives in arbitrary chunks.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace spark::launch {

struct OutputFormat {
  bool tag = false;        // "[rank] "
  bool timestamp = false;  // "2026-11-30T06:07:05.123 "
};

class LineForwarder {
 public:
  using Sink = std::function<void(std::string_view)>;
  /// Lines longer than this are passed on in pieces of this size (bounded memory).
  static constexpr size_t kMaxLine = 64 * 1024;

  LineForwarder(int rank, OutputFormat format, Sink sink);
  /// Takes a chunk of output; emits every completed line.
  void feed(std::string_view data);
  /// End of stream: emits a pending partial line (a newline is added).
  void finish();

  /// The prefix for one line (exposed for tests).
  static std::string prefix(int rank, OutputFormat format);

 private:
  void emit(std::string_view line);  // `line` includes its '\n'

  int rank_;
  OutputFormat format_;
  Sink sink_;
  std::string pending_;
  std::string out_;
};

}  // namespace spark::launch
