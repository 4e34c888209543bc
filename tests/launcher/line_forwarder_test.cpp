#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "line_forwarder.hpp"

namespace spark::launch {
namespace {

struct Collect {
  std::vector<std::string> out;
  LineForwarder::Sink sink() {
    return [this](std::string_view s) { out.emplace_back(s); };
  }
};

TEST(LineForwarder, WholeLinesOnly) {
  Collect c;
  LineForwarder f(3, {true, false}, c.sink());
  f.feed("hel");
  EXPECT_TRUE(c.out.empty());
  f.feed("lo\nwor");
  f.feed("ld\nx\n");
  f.feed("tail");
  f.finish();
  EXPECT_EQ(c.out,
            (std::vector<std::string>{"[3] hello\n", "[3] world\n", "[3] x\n", "[3] tail\n"}));
}

TEST(LineForwarder, UntaggedPassesBytes) {
  Collect c;
  LineForwarder f(0, {}, c.sink());
  f.feed("a\nb");
  f.feed("c\n");
  EXPECT_EQ(c.out, (std::vector<std::string>{"a\n", "bc\n"}));
}

TEST(LineForwarder, LongLinesAreBounded) {
  Collect c;
  LineForwarder f(0, {}, c.sink());
  f.feed(std::string(LineForwarder::kMaxLine + 10, 'x'));
  ASSERT_EQ(c.out.size(), 1u);
  EXPECT_EQ(c.out[0].size(), LineForwarder::kMaxLine + 11);
}

TEST(LineForwarder, Timestamp) {
  std::string p = LineForwarder::prefix(12, {true, true});
  EXPECT_TRUE(std::regex_match(p, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[12\] )")))
      << p;
}

}  // namespace
}  // namespace spark::launch
