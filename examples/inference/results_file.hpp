// The durable, resumable results file of a batch job (the format rule, in one place; the doc
// page docs/examples/sharded_inference.md describes it for other implementations):
//   OUT      one result line per request, in input order, nothing else: line i is request i's.
//   OUT.job  one JSON object, the job record: what the results depend on (JobRecord). It is
//            written (temporary file, fsync, rename, fsync of the folder) after OUT was
//            emptied and before the first result, so it never stands over another job's lines.
// Results are appended and made durable (fdatasync) at batch boundaries, so after a crash OUT
// holds complete lines of this job plus at most one torn or invalid last line; opening it
// again removes that line and resumes after the last complete one.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace spark::example {

/// Everything the bytes of the results depend on. Two runs with equal records write equal
/// results; a field that differs names the reason an output cannot be resumed.
struct JobRecord {
  std::string program;       // the writer ("sharded_inference"): its results' exact bits
  std::string model_sha256;  // of the model file's bytes
  std::string input_sha256;  // of the requests' bytes
  std::size_t requests = 0;
  std::size_t new_tokens = 0;
  std::string reduce;  // --reduce
  int ranks = 0;       // the rank count where results depend on it (--reduce plain), else 0
  nlohmann::json to_json() const;
};

/// SHA-256 (hex) of a string and of a file's bytes (errors name the file).
std::string sha256_hex(const std::string& bytes);
std::string sha256_file_hex(const std::string& path);

/// What to do with an output that exists.
enum class ExistingOutput {
  resume,          // the job record must match this job (else refuse, naming the field)
  start_over,      // --restart-output on a first attempt: discard it
  resume_if_same,  // --restart-output on a restarted attempt: keep this job's progress
};

/// Rank 0's results file. The constructor checks or creates OUT and OUT.job, removes a torn
/// last line and counts the complete ones; errors (std::invalid_argument) name the file, the
/// differing field and the fix. is_result(i, line) says whether line is request i's result.
class ResultsFile {
 public:
  using LineCheck = std::function<bool(std::size_t index, const std::string& line)>;
  ResultsFile(const std::string& path, const JobRecord& job, ExistingOutput existing,
              const LineCheck& is_result, const std::function<void(const std::string&)>& note);
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  /// Requests already complete in the file (a prefix of the input).
  std::size_t done() const { return done_; }
  /// Appends result lines (each ending in '\n') of `count` requests; durable after commit().
  void append(const std::string& lines, std::size_t count);
  /// fdatasync unless durable is false (the benchmark's "no fsync" case).
  void commit(bool durable);

 private:
  struct Fd {  // closes on destruction, also when the constructor throws
    int fd = -1;
    ~Fd();
  };
  std::string path_;
  Fd fd_;
  std::size_t done_ = 0;
};

}  // namespace spark::example
