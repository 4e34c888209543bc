// Host-side unit tests of the verbs layer (no RDMA device needed): GID selection from a fake
// sysfs tree, endpoint wire format, limits, and "no RDMA device" handling.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "spark/error.hpp"
#include "verbs/endpoint.hpp"
#include "verbs/gid.hpp"
#include "verbs/handles.hpp"
#include "verbs/limits.hpp"
#include "verbs/qp.hpp"
#include "verbs/verbs_error.hpp"

namespace fs = std::filesystem;
using namespace spark::verbs;

namespace {

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";

// A fake /sys/class/infiniband with one device, laid out like rxe/mlx5 show it.
class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("spark_fake_sysfs_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(port() / "gids");
    fs::create_directories(port() / "gid_attrs" / "types");
    for (int i = 0; i < 16; ++i) gid(i, kZero, "");
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path port() const { return root_ / "mlx5_0" / "ports" / "1"; }
  void gid(int i, const std::string& value, const std::string& type) {
    std::ofstream(port() / "gids" / std::to_string(i)) << value << "\n";
    auto t = port() / "gid_attrs" / "types" / std::to_string(i);
    if (type.empty()) {
      fs::remove(t);  // unused entries cannot be read on real sysfs either
    } else {
      std::ofstream(t) << type << "\n";
    }
  }
  GidChoice pick(std::optional<std::string> override_value = std::nullopt) {
    return select_gid(root_.string(), "mlx5_0", 1, override_value);
  }
  fs::path root_;
};

}  // namespace

TEST_F(FakeSysfs, PicksIpv4RoceV2ByValueNotByIndex) {
  // A Spark-like table: link-local v1/v2, IPv4 v1 first, then IPv4 v2 at index 3.
  gid(0, "fe80:0000:0000:0000:c8be:4dff:fedf:9790", "IB/RoCE v1");
  gid(1, "fe80:0000:0000:0000:c8be:4dff:fedf:9790", "RoCE v2");
  gid(2, "0000:0000:0000:0000:0000:ffff:0a32:0001", "IB/RoCE v1");
  gid(3, "0000:0000:0000:0000:0000:ffff:0a32:0001", "RoCE v2");
  GidChoice c = pick();
  EXPECT_EQ(c.index, 3);
  EXPECT_EQ(gid_text(c.gid), "::ffff:10.50.0.1");
  EXPECT_EQ(c.source, "sysfs");
}

TEST_F(FakeSysfs, FollowsTheTableWhenIndicesMove) {
  gid(0, "fe80:0000:0000:0000:c8be:4dff:fedf:9790", "RoCE v2");
  gid(7, "0000:0000:0000:0000:0000:ffff:c0a8:0102", "RoCE v2");
  gid(9, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2");
  EXPECT_EQ(pick().index, 7);  // lowest IPv4 RoCE v2 index
  gid(7, kZero, "");
  EXPECT_EQ(pick().index, 9);
}

TEST_F(FakeSysfs, NoIpv4GidSaysWhatWasFoundAndTheFix) {
  gid(0, "fe80:0000:0000:0000:c8be:4dff:fedf:9790", "RoCE v2");
  try {
    pick();
    FAIL() << "expected VerbsError";
  } catch (const VerbsError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("no IPv4 RoCE v2 GID on mlx5_0 port 1"), std::string::npos) << m;
    EXPECT_NE(m.find("fe80::c8be:4dff:fedf:9790"), std::string::npos) << m;
    EXPECT_NE(m.find("ip addr add"), std::string::npos) << m;
  }
}

TEST_F(FakeSysfs, Ipv4GidOfTypeV1IsNotChosen) {
  gid(2, "0000:0000:0000:0000:0000:ffff:0a32:0001", "IB/RoCE v1");
  EXPECT_THROW(pick(), VerbsError);
}

TEST_F(FakeSysfs, OverrideWinsAndIsChecked) {
  gid(1, "fe80:0000:0000:0000:c8be:4dff:fedf:9790", "RoCE v2");
  gid(3, "0000:0000:0000:0000:0000:ffff:0a32:0001", "RoCE v2");
  GidChoice c = pick(std::string("1"));
  EXPECT_EQ(c.index, 1);
  EXPECT_EQ(c.source, "SPARK_IB_GID_INDEX");
  EXPECT_THROW(pick(std::string("5")), VerbsError);     // empty entry
  EXPECT_THROW(pick(std::string("4000")), VerbsError);  // no such entry
}

TEST_F(FakeSysfs, OverrideParsingIsStrict) {
  gid(3, "0000:0000:0000:0000:0000:ffff:0a32:0001", "RoCE v2");
  for (const char* bad : {"", " ", "abc", "3x", "-1", "1.0", "70000", "0x3"}) {
    try {
      pick(std::string(bad));
      FAIL() << "accepted SPARK_IB_GID_INDEX='" << bad << "'";
    } catch (const spark::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("SPARK_IB_GID_INDEX"), std::string::npos);
    }
  }
}

TEST_F(FakeSysfs, MissingDeviceIsNamed) {
  try {
    select_gid(root_.string(), "nosuch0", 1, std::nullopt);
    FAIL();
  } catch (const VerbsError& e) {
    EXPECT_NE(std::string(e.what()).find("nosuch0 port 1"), std::string::npos);
  }
}

TEST(Gid, ParseSysfsText) {
  auto g = parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:0a32:0001");
  ASSERT_TRUE(g);
  EXPECT_TRUE(is_ipv4_mapped(*g));
  EXPECT_FALSE(parse_sysfs_gid(""));
  EXPECT_FALSE(parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:0a32:000"));
  EXPECT_FALSE(parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:0a32:00g1"));
  EXPECT_FALSE(parse_sysfs_gid("0000-0000:0000:0000:0000:ffff:0a32:0001"));
}

namespace {
Endpoint sample() {
  Endpoint ep;
  ep.device = "roceP2p1s0f0";
  ep.port = 1;
  ep.gid_index = 3;
  ep.gid = *parse_sysfs_gid("0000:0000:0000:0000:0000:ffff:0a32:0001");
  ep.qpn = 0x123456;
  ep.psn = 0xabcdef;
  ep.mtu = 4096;
  ep.addr = 0x7f00deadbeef0000ull;
  ep.rkey = 0x89abcdef;
  ep.bytes = 1ull << 33;
  return ep;
}
}  // namespace

TEST(Endpoint, RoundTrip) {
  Endpoint ep = sample();
  auto bytes = serialize(ep);
  EXPECT_EQ(deserialize(bytes), ep);
  EXPECT_EQ(describe(ep), "roceP2p1s0f0 port 1 gid[3] ::ffff:10.50.0.1 qpn 1193046 mtu 4096");
}

TEST(Endpoint, RejectsMalformed) {
  auto bytes = serialize(sample());
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, bytes.size() - 1}) {
    EXPECT_THROW(deserialize(std::span(bytes).first(cut)), VerbsError) << cut;
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_THROW(deserialize(longer), VerbsError);
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{0};
  EXPECT_THROW(deserialize(bad_magic), VerbsError);
  Endpoint e = sample();
  e.mtu = 1500;
  EXPECT_THROW(deserialize(serialize(e)), VerbsError);
  e = sample();
  e.qpn = 0x1000000;
  EXPECT_THROW(deserialize(serialize(e)), VerbsError);
  e = sample();
  e.device = "";
  EXPECT_THROW(serialize(e), VerbsError);
}

TEST(Limits, MemlockProblemExplainsTheFix) {
  EXPECT_EQ(memlock_problem(std::nullopt, 1ull << 40), "");
  EXPECT_EQ(memlock_problem(1ull << 30, 1ull << 20), "");
  std::string m = memlock_problem(65536, 8 << 20);
  EXPECT_NE(m.find("8388608 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("ulimit -l 64"), std::string::npos) << m;
  EXPECT_NE(m.find("limits.conf"), std::string::npos) << m;
  EXPECT_NE(m.find("LimitMEMLOCK"), std::string::npos) << m;
}

TEST(Limits, MtuMismatchNamesPeerAndLane) {
  EXPECT_EQ(mtu_mismatch(4096, 4096, 1, "rxe0"), "");
  std::string m = mtu_mismatch(4096, 1024, 2, "rocep1s0f0");
  EXPECT_NE(m.find("rank 2"), std::string::npos);
  EXPECT_NE(m.find("rocep1s0f0"), std::string::npos);
  EXPECT_NE(m.find("local 4096 bytes, peer 1024 bytes"), std::string::npos);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096);
  EXPECT_EQ(mtu_bytes(IBV_MTU_1024), 1024);
}

TEST(Limits, QpGivesUpWithinHalfTheFailStopTimeout) {
  for (std::uint32_t ms : {100u, 1000u, 2000u, 10000u, 60000u, 600000u}) {
    QpTimeouts t = qp_timeouts(ms);
    EXPECT_LE(t.give_up_ms, ms / 2.0) << ms;
    EXPECT_GE(t.timeout, 1) << ms;
    EXPECT_LE(t.timeout, 20) << ms;
    EXPECT_LT(t.rnr_retry, 7) << "rnr_retry 7 retries forever";
    EXPECT_LE(t.retry_cnt, 7);
  }
  // The default 10 s: 4.096 us * 2^17 = 537 ms per try, 8 tries = 4.3 s.
  EXPECT_EQ(qp_timeouts(10000).timeout, 17);
  EXPECT_EQ(qp_timeouts(600000).timeout, 20);
}

TEST(Errors, CallFailedNamesCallDeviceAndErrno) {
  std::string m = call_failed("ibv_create_qp", "rxe0", ENOMEM);
  EXPECT_EQ(m, "ibv_create_qp on rxe0 failed: Cannot allocate memory (errno 12)");
}

TEST(NoDevice, MessageIsPlain) {
  std::string m = no_device_message(ENOSYS, "");
  EXPECT_NE(m.find("no RDMA device found"), std::string::npos);
  EXPECT_NE(m.find("Function not implemented"), std::string::npos);
  EXPECT_NE(m.find("SPARK_TRANSPORT=tcp"), std::string::npos);
  EXPECT_NE(no_device_message(0, "rocep1s0f0").find("wanted rocep1s0f0"), std::string::npos);
}

TEST(NoDevice, OpenDeviceOnThisHost) {
  DeviceList list;
  if (list.size() > 0)
    GTEST_SKIP() << "this host has RDMA devices; the no-device path is not reachable";
  try {
    open_device("");
    FAIL() << "open_device succeeded without devices";
  } catch (const VerbsError& e) {
    EXPECT_NE(std::string(e.what()).find("no RDMA device found"), std::string::npos) << e.what();
  }
}
