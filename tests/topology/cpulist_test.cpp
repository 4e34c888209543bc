#include <gtest/gtest.h>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/error.hpp"

namespace spark::topo {
namespace {

TEST(CpuList, FormatsRanges) {
  EXPECT_EQ(format_cpu_list({15, 16, 17, 18, 19}), "15-19");
  EXPECT_EQ(format_cpu_list({19, 5, 6, 7, 8, 9, 15, 16, 17, 18}), "5-9,15-19");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({1, 3, 4}), "1,3-4");
  EXPECT_EQ(format_cpu_list({}), "");
}

TEST(CpuList, ParsesAndRoundTrips) {
  EXPECT_EQ(parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("8,0-1,1"), (std::vector<int>{0, 1, 8}));
  EXPECT_EQ(format_cpu_list(parse_cpu_list("5-9,15-19")), "5-9,15-19");
}

TEST(CpuList, RejectsGarbage) {
  for (const char* bad :
       {"", "abc", "12x", "3-1", "1,,2", "1,", ",1", " 1", "-1", "1-", "99999", "0x3"}) {
    EXPECT_THROW(parse_cpu_list(bad), TopologyError) << "accepted \"" << bad << "\"";
  }
}

TEST(CpuList, ErrorNamesTheOption) {
  try {
    parse_cpu_list("4-2", "--cpu-list");
    FAIL() << "no exception";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("--cpu-list \"4-2\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spark::topo
