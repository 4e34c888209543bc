// Unit tests for SLURM's compressed host and count lists (no SLURM needed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "slurm_hostlist.hpp"

namespace spark::launch::slurm {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmHostlist, SingleHost) {
  EXPECT_EQ(expand_hostlist("spark1"), Hosts{"spark1"});
}

TEST(SlurmHostlist, RangesAndSingles) {
  EXPECT_EQ(expand_hostlist("spark[1-3,5]"), (Hosts{"spark1", "spark2", "spark3", "spark5"}));
}

TEST(SlurmHostlist, PlainHostThenPaddedRange) {
  EXPECT_EQ(expand_hostlist("a,b[01-02]"), (Hosts{"a", "b01", "b02"}));
}

TEST(SlurmHostlist, PaddingFollowsTheLowerBound) {
  // As SLURM's own `scontrol show hostnames` does.
  EXPECT_EQ(expand_hostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("n[01-2]"), (Hosts{"n01", "n02"}));
  EXPECT_EQ(expand_hostlist("n[0]"), Hosts{"n0"});
}

TEST(SlurmHostlist, Suffix) {
  EXPECT_EQ(expand_hostlist("node[1-2]-ib"), (Hosts{"node1-ib", "node2-ib"}));
  EXPECT_EQ(expand_hostlist("node[1-2]-ib,login"), (Hosts{"node1-ib", "node2-ib", "login"}));
}

TEST(SlurmHostlist, CommasInsideAndOutsideBrackets) {
  EXPECT_EQ(expand_hostlist("a[1,3-4],b,c[7,09-10]"),
            (Hosts{"a1", "a3", "a4", "b", "c7", "c09", "c10"}));
}

TEST(SlurmHostlist, SeveralGroupsExpandAsProductLeftmostSlowest) {
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[1-2]"),
            (Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expand_hostlist("a[1-2]b[01-02]"), (Hosts{"a1b01", "a1b02", "a2b01", "a2b02"}));
}

TEST(SlurmHostlist, OrderAndDuplicatesKept) {
  EXPECT_EQ(expand_hostlist("z,a[2,1],z"), (Hosts{"z", "a2", "a1", "z"}));
}

TEST(SlurmHostlist, DomainNamesAndUnderscores) {
  EXPECT_EQ(expand_hostlist("spark[1-2].lab.example,x_y"),
            (Hosts{"spark1.lab.example", "spark2.lab.example", "x_y"}));
}

void expect_error(const std::string& text, const std::string& needle) {
  try {
    expand_hostlist(text, "SLURM_JOB_NODELIST");
    ADD_FAILURE() << "'" << text << "' was accepted";
  } catch (const SlurmError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("SLURM_JOB_NODELIST '" + text + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << "'" << text << "': " << msg;
  }
}

TEST(SlurmHostlist, MalformedInputsAreRefusedWithTheReason) {
  expect_error("", "empty");
  expect_error("a,,b", "empty entry");
  expect_error(",a", "empty entry");
  expect_error("a,", "empty entry");
  expect_error("n[1-2", "'[' without ']'");
  expect_error("n]", "']' without '['");
  expect_error("n[1-2]]", "']' without '['");
  expect_error("n[[1]]", "nested '['");
  expect_error("n[]", "empty brackets");
  expect_error("n[1,,2]", "empty range");
  expect_error("n[3-1]", "runs backwards");
  expect_error("n[a-b]", "not a number");
  expect_error("n[1-]", "empty number");
  expect_error("n[-1]", "empty number");
  expect_error("n[1-2-3]", "not a number");
  expect_error("n[ 1]", "not a number");
  expect_error("a b", "not allowed");
  expect_error("a\tb", "not allowed");
  expect_error("n[1234567890]", "too long");
  expect_error("n[0-99999999]", "more than 65536 hosts");
  expect_error("a[1-300]b[1-300]", "more than 65536 hosts");
}

TEST(SlurmCounts, RepeatsAndSingles) {
  EXPECT_EQ(expand_counts("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(expand_counts("3"), std::vector<int>{3});
  EXPECT_EQ(expand_counts("1,4(x1),0"), (std::vector<int>{1, 4, 0}));
  EXPECT_EQ(expand_counts("16(x2)"), (std::vector<int>{16, 16}));
}

TEST(SlurmCounts, MalformedInputsAreRefused) {
  for (const char* text : {"", "x", "2x", "2(x)", "2(x0)", "2(3)", "2(x3", "2x3)", "2(x3),", ",1",
                           "1,,2", "-1", "2(x-1)", "2(x3)1", "1 ,2", "9999999999"}) {
    try {
      expand_counts(text, "SLURM_TASKS_PER_NODE");
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const SlurmError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("SLURM_TASKS_PER_NODE '") + text + "' is malformed"),
                std::string::npos)
          << msg;
    }
  }
}

TEST(SlurmCpuList, Format) {
  EXPECT_EQ(format_cpu_list({}), "");
  EXPECT_EQ(format_cpu_list({3}), "3");
  EXPECT_EQ(format_cpu_list({5, 0, 1, 2, 2, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_cpu_list({15, 16, 17, 18, 19}), "15-19");
}

}  // namespace
}  // namespace spark::launch::slurm
