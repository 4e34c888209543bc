#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "hostfile.hpp"
#include "usage_error.hpp"

namespace spark::launch {
namespace {

TEST(HostList, Parses) {
  auto h = parse_host_list("a:2,b,c.example.org:16");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "a");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_TRUE(h[0].slots_given);
  EXPECT_EQ(h[1].name, "b");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_FALSE(h[1].slots_given);
  EXPECT_EQ(h[2].slots, 16);
}

TEST(HostList, Rejects) {
  for (const char* bad : {"", "a,,b", "a:", "a:0", "a:x", "a:2x", ":3", "a b", "a:-1"}) {
    EXPECT_THROW(parse_host_list(bad), UsageError) << bad;
  }
}

TEST(Hostfile, ParsesOpenMpiFormat) {
  auto h = parse_hostfile(
      "# cluster\n"
      "spark1 slots=4\n"
      "\n"
      "  spark2   slots=2 max_slots=8   # second box\n"
      "spark3\n",
      "hosts.txt");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "spark1");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].name, "spark2");
  EXPECT_EQ(h[1].slots, 2);
  EXPECT_EQ(h[2].slots, 1);
}

void expect_error_at(const std::string& text, const std::string& where) {
  try {
    parse_hostfile(text, "hosts.txt");
    FAIL() << "accepted: " << text;
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(where, 0), 0u) << e.what();
  }
}

TEST(Hostfile, AcceptsHydraHostColonSlots) {
  auto hosts = parse_hostfile("localhost:2\nnodeB:4 # Hydra's form\n", "hf");
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].name, "localhost");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_TRUE(hosts[0].slots_given);
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_THROW(parse_hostfile("nodeB:x\n", "hf"), UsageError);
}

TEST(Hostfile, ErrorsCiteFileAndLine) {
  expect_error_at("a\nb slots=abc\n", "hosts.txt:2: ");
  expect_error_at("a\n\n# x\nb cpus=3\n", "hosts.txt:4: ");
  expect_error_at("a slots=0\n", "hosts.txt:1: ");
  expect_error_at("bad/name\n", "hosts.txt:1: ");
  expect_error_at("# only comments\n", "hosts.txt: no hosts");
}

TEST(Hostfile, UnreadableFile) {
  EXPECT_THROW(read_hostfile("/nonexistent/hosts"), UsageError);
  EXPECT_THROW(read_hostfile("/"), UsageError);  // a directory
  const std::string path = ::testing::TempDir() + "/sparkrun_hosts_test";
  {
    std::ofstream f(path);
    f << "localhost slots=3\n";
  }
  auto h = read_hostfile(path);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].slots, 3);
  std::remove(path.c_str());
}

TEST(Hosts, MergeAddsSlots) {
  auto m = merge_hosts({{"a", 2, true}, {"b", 1, false}, {"a", 3, true}});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].name, "a");
  EXPECT_EQ(m[0].slots, 5);
}

}  // namespace
}  // namespace spark::launch
