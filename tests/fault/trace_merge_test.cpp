// The launcher's trace merge on its own: per-rank files in, one Chrome trace out; missing,
// stale and truncated per-rank files are marked, never fatal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "trace_merge.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using spark::launch::merge_rank_traces;

namespace {

class TraceMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/spark_trace_merge_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    base_ = (dir_ / "job.json").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(int rank, const std::string& text) {
    std::ofstream(base_ + ".rank" + std::to_string(rank) + ".json") << text;
  }
  static std::string rank_file(int rank, double ts) {
    return R"({"traceEvents":[{"name":"allreduce","ph":"X","pid":)" + std::to_string(rank) +
           R"(,"tid":0,"ts":)" + std::to_string(ts) + R"(,"dur":10,"args":{"seq":3,"bytes":8}}]})";
  }
  json merged() {
    std::ifstream in(base_);
    return json::parse(in);
  }
  static int count(const json& doc, const std::string& name) {
    int n = 0;
    for (const auto& e : doc["traceEvents"]) n += e.value("name", "") == name;
    return n;
  }
  fs::path dir_;
  std::string base_;
};

TEST_F(TraceMerge, MergesEveryRankAndMarksTheMissingOne) {
  const auto start = fs::file_time_type::clock::now() - std::chrono::seconds(1);
  write(0, rank_file(0, 100));
  // The bare-array form of a Chrome trace is accepted too.
  write(2, R"([{"name":"allreduce","ph":"X","pid":2,"tid":0,"ts":200,"dur":10,"args":{"seq":3}}])");
  const auto r = merge_rank_traces(base_, 3, start);
  EXPECT_EQ(r.merged, 2);
  EXPECT_EQ(r.missing, 1);
  EXPECT_NE(r.message.find("trace of 2 of 3 ranks written to " + base_), std::string::npos)
      << r.message;
  const json doc = merged();
  EXPECT_EQ(count(doc, "allreduce"), 2);
  EXPECT_EQ(count(doc, "no trace from rank 1"), 1);
  EXPECT_EQ(doc["otherData"]["missing"], 1);
}

TEST_F(TraceMerge, StaleAndTruncatedFilesAreMarkedNotMerged) {
  write(1, rank_file(1, 50));  // from an "earlier run"
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = fs::file_time_type::clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  write(0, rank_file(0, 100));
  write(2, R"({"traceEvents":[{"name":"allre)");  // killed while writing
  const auto r = merge_rank_traces(base_, 3, start);
  EXPECT_EQ(r.merged, 1);
  EXPECT_EQ(r.missing, 2);
  const json doc = merged();
  EXPECT_EQ(count(doc, "allreduce"), 1);
  for (const auto& e : doc["traceEvents"]) {
    const std::string why = e.contains("args") ? e["args"].value("why", "") : "";
    if (e.value("name", "") == "no trace from rank 1") {
      EXPECT_NE(why.find("stale"), std::string::npos);
    }
    if (e.value("name", "") == "no trace from rank 2") {
      EXPECT_NE(why.find("not valid JSON"), std::string::npos);
    }
  }
}

TEST_F(TraceMerge, NoRankFileWritesNothing) {
  const auto r = merge_rank_traces(base_, 2, fs::file_time_type::clock::now());
  EXPECT_EQ(r.merged, 0);
  EXPECT_FALSE(fs::exists(base_));
  EXPECT_NE(r.message.find("nothing merged"), std::string::npos) << r.message;
}

}  // namespace
