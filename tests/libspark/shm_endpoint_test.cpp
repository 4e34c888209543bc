// The shm endpoint ("segment;pid;pid-namespace;probe-address;cookie"): its one parser refuses
// malformed text with a BootstrapError naming the text, the rank and the field; and the
// cross-memory probe at attach (two transports in this process, so the probe reads and writes
// this process's own memory) passes only with the right cookie and with SPARK_SHM_CMA on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "spark/error.hpp"
#include "transport/shm/shm_transport.hpp"

namespace spark::transport {
namespace {

std::string parse_error(const std::string& text) {
  try {
    ShmEndpoint::parse(text, 3);
  } catch (const BootstrapError& e) {
    return e.what();
  }
  return "";
}

TEST(ShmEndpoint, RoundTrip) {
  const ShmEndpoint ep{"/spark-job-node-r1", 4242, "4026531836", 0xffff800012345678u,
                       0xfedcba9876543211u};
  const ShmEndpoint back = ShmEndpoint::parse(ep.text(), 1);
  EXPECT_EQ(back.segment, ep.segment);
  EXPECT_EQ(back.pid, ep.pid);
  EXPECT_EQ(back.pid_namespace, ep.pid_namespace);
  EXPECT_EQ(back.probe, ep.probe);
  EXPECT_EQ(back.cookie, ep.cookie);
}

TEST(ShmEndpoint, MalformedNamesTextRankAndField) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"/seg;12;ns", "3 fields, not 5"},
      {"/seg;12;ns;1;2;3", "6 fields, not 5"},
      {";12;ns;1;2", "segment field is empty"},
      {"/seg;12x;ns;1;2", "pid field '12x'"},
      {"/seg;;ns;1;2", "pid field ''"},
      {"/seg;-4;ns;1;2", "pid field '-4'"},
      {"/seg;99999999999;ns;1;2", "pid field '99999999999'"},
      {"/seg;12;;1;2", "pid-namespace field is empty"},
      {"/seg;12;ns;0;2", "probe-address field '0'"},
      {"/seg;12;ns;1;18446744073709551616", "cookie field '18446744073709551616'"},
      {"/seg;12;ns;1; 2", "cookie field ' 2'"},
  };
  for (const auto& c : cases) {
    const std::string what = parse_error(c.text);
    EXPECT_NE(what.find(std::string("'") + c.text + "' from rank 3"), std::string::npos) << what;
    EXPECT_NE(what.find(c.says), std::string::npos) << c.text << ": " << what;
  }
}

// Found by fuzz.shm_endpoint: the peer's text went into the message as it was, and a NUL in
// it cut what() short, before the rank and the field.
TEST(ShmEndpoint, MalformedTextIsShownPrintable) {
  const std::string text("/seg\0x;12;ns;1", 14);
  const std::string what = parse_error(text);
  EXPECT_NE(what.find("'/seg\\x00x;12;ns;1' from rank 3"), std::string::npos) << what;
  EXPECT_NE(what.find("4 fields, not 5"), std::string::npos) << what;
  const std::string huge = parse_error(std::string(100000, 'a'));
  EXPECT_LT(huge.size(), 600u);
  EXPECT_NE(huge.find("...' from rank 3"), std::string::npos) << huge;
}

struct Pair {
  ShmTransport t0, t1;
  explicit Pair(bool cma)
      : t0(0, 2, {0, 1}, "shmtest" + std::to_string(::getpid()), "node", ShmOptions{2, 4096, cma}),
        t1(1, 2, {0, 1}, "shmtest" + std::to_string(::getpid()), "node",
           ShmOptions{2, 4096, true}) {}
};

TEST(ShmEndpoint, ProbePassesWithTheCookie) {
  Pair p(true);
  p.t0.attach(1, p.t1.endpoint());
  if (!p.t0.can_access_peer(1) && std::getenv("SPARK_TEST_EMULATED") != nullptr)
    GTEST_SKIP() << "qemu-user: the emulator's addresses are not the host's (the probe's case)";
  EXPECT_TRUE(p.t0.can_access_peer(1));
  // And the copy works: this process's own word, read through process_vm_readv.
  std::uint64_t word = 0x1234, got = 0;
  ASSERT_EQ(p.t0.access_peer(1, &got, reinterpret_cast<std::uintptr_t>(&word), sizeof got, false),
            0);
  EXPECT_EQ(got, 0x1234u);
}

TEST(ShmEndpoint, ProbeFailsWithAnotherCookie) {
  Pair p(true);
  ShmEndpoint ep = ShmEndpoint::parse(p.t1.endpoint(), 1);
  ep.cookie ^= 2;  // another process at that address (or an emulator's other mapping)
  p.t0.attach(1, ep.text());
  EXPECT_FALSE(p.t0.can_access_peer(1));
}

TEST(ShmEndpoint, CrossMemoryOff) {
  Pair p(false);  // SPARK_SHM_CMA=off on rank 0
  p.t0.attach(1, p.t1.endpoint());
  EXPECT_FALSE(p.t0.can_access_peer(1));
  // The peer may still reach rank 0; the call's agreement (coll/collectives.cpp) makes both
  // fall back.
  p.t1.attach(0, p.t0.endpoint());
  if (!p.t1.can_access_peer(0) && std::getenv("SPARK_TEST_EMULATED") != nullptr)
    GTEST_SKIP() << "qemu-user: the emulator's addresses are not the host's (the probe's case); "
                    "rank 0's side, off by SPARK_SHM_CMA, was checked";
  EXPECT_TRUE(p.t1.can_access_peer(0));
}

TEST(ShmEndpoint, AttachRefusesMalformed) {
  Pair p(true);
  EXPECT_THROW(p.t0.attach(1, "/seg;12"), BootstrapError);
}

}  // namespace
}  // namespace spark::transport
