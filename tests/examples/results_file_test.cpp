// The durable results file of the inference examples (results_file.hpp): a fresh file and its
// record, resuming, the torn last line, and every refusal (naming the field, leaving the file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "results_file.hpp"

using namespace spark::example;

namespace {

struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("spark_results_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  static inline int counter = 0;
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

JobRecord job(std::size_t requests = 5) {
  return {"test", std::string(64, 'a'), std::string(64, 'b'), requests, 3, "exact", 0};
}

// Line i of a result file is "rI".
bool is_result(std::size_t i, const std::string& line) {
  return line == "r" + std::to_string(i);
}

struct Opened {
  std::unique_ptr<ResultsFile> file;
  std::vector<std::string> notes;
};

Opened open(const std::string& path, const JobRecord& j,
            ExistingOutput existing = ExistingOutput::resume) {
  Opened o;
  o.file = std::make_unique<ResultsFile>(path, j, existing, is_result,
                                         [&](const std::string& n) { o.notes.push_back(n); });
  return o;
}

std::string refusal(const std::string& path, const JobRecord& j) {
  try {
    open(path, j);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ResultsFile, FreshFileGetsItsRecordAndResumesAfterItsLines) {
  TempDir d;
  const auto out = d.file("out.jsonl");
  {
    auto o = open(out, job());
    EXPECT_EQ(o.file->done(), 0u);
    o.file->append("r0\nr1\n", 2);
    o.file->commit(true);
    EXPECT_EQ(o.file->done(), 2u);
  }
  EXPECT_EQ(slurp(out + ".job"), job().to_json().dump() + "\n");
  EXPECT_NE(slurp(out + ".job").find("\"format\":\"spark-batch-results/1\""), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + ".job.tmp"));
  auto o = open(out, job());
  EXPECT_EQ(o.file->done(), 2u);
  EXPECT_TRUE(o.notes.empty());
  o.file->append("r2\n", 1);
  EXPECT_EQ(slurp(out), "r0\nr1\nr2\n");
}

TEST(ResultsFile, TornOrInvalidLastLineIsRemoved) {
  TempDir d;
  const auto out = d.file("out.jsonl");
  open(out, job());
  for (const std::string& tail :
       std::vector<std::string>{"r2-partial", "garbage\n", std::string("\0\0\0", 3)}) {
    put(out, "r0\nr1\n" + tail);
    auto o = open(out, job());
    EXPECT_EQ(o.file->done(), 2u) << tail;
    EXPECT_EQ(slurp(out), "r0\nr1\n") << tail;
    ASSERT_EQ(o.notes.size(), 1u);
    EXPECT_NE(
        o.notes[0].find("removed a torn last line (" + std::to_string(tail.size()) + " bytes)"),
        std::string::npos)
        << o.notes[0];
  }
}

TEST(ResultsFile, RefusalsNameTheProblemAndLeaveTheFile) {
  TempDir d;
  const auto out = d.file("out.jsonl");
  open(out, job());
  put(out, "r0\nr1\n");
  JobRecord other = job();
  other.new_tokens = 4;
  other.reduce = "plain";
  EXPECT_NE(refusal(out, other)
                .find("new_tokens is 3 there, 4 here; reduce is \"exact\" there, "
                      "\"plain\" here"),
            std::string::npos)
      << refusal(out, other);
  EXPECT_NE(refusal(out, other).find("pass --restart-output"), std::string::npos);
  other = job();
  other.model_sha256 = std::string(64, 'c');
  EXPECT_NE(refusal(out, other).find("model_sha256 is"), std::string::npos);
  EXPECT_EQ(slurp(out), "r0\nr1\n");
  // A changed line with more after it is no crash's trace.
  put(out, "r0\nrX\nr2\n");
  EXPECT_NE(refusal(out, job()).find("line 2 is not request 1's result, and more lines follow"),
            std::string::npos);
  // More lines than requests.
  put(out, "r0\nr1\nr2\n");
  EXPECT_NE(refusal(out, job(2)).find("requests is 5 there, 2 here"), std::string::npos);
  // A file with content and no record: anyone's file.
  std::filesystem::remove(out + ".job");
  EXPECT_NE(refusal(out, job()).find("has no job record"), std::string::npos);
  EXPECT_EQ(slurp(out), "r0\nr1\nr2\n");
  // An empty file without a record is a fresh start (a crash before the record was written).
  put(out, "");
  EXPECT_EQ(open(out, job()).file->done(), 0u);
}

TEST(ResultsFile, RestartOutputStartsOverOnAFirstAttemptOnly) {
  TempDir d;
  const auto out = d.file("out.jsonl");
  open(out, job());
  put(out, "r0\nr1\n");
  // A restarted attempt with --restart-output keeps this job's progress...
  EXPECT_EQ(open(out, job(), ExistingOutput::resume_if_same).file->done(), 2u);
  // ...and starts over for another job, as the first attempt does for any.
  JobRecord other = job();
  other.new_tokens = 4;
  EXPECT_EQ(open(out, other, ExistingOutput::resume_if_same).file->done(), 0u);
  EXPECT_EQ(slurp(out), "");
  EXPECT_EQ(slurp(out + ".job"), other.to_json().dump() + "\n");
  put(out, "r0\n");
  EXPECT_EQ(open(out, other, ExistingOutput::start_over).file->done(), 0u);
  EXPECT_EQ(slurp(out), "");
}

TEST(ResultsFile, Sha256OfKnownBytes) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir d;
  put(d.file("f"), "abc");
  EXPECT_EQ(sha256_file_hex(d.file("f")), sha256_hex("abc"));
  EXPECT_THROW(sha256_file_hex(d.file("missing")), std::invalid_argument);
}

}  // namespace
