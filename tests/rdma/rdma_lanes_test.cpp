// Host-side unit tests of RDMA lanes for the fabric map (libspark/src/fabric/rdma_lanes.*):
// a fake /sys/class/infiniband laid out as rxe and mlx5 show it, with made-up interface
// addresses. The real thing runs in the VM (rdma.vm_fabric).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fabric/local_lanes.hpp"
#include "fabric/rdma_lanes.hpp"
#include "spark/error.hpp"

namespace fs = std::filesystem;
using namespace spark::fabric;

namespace {

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";
constexpr const char* kLinkLocal = "fe80:0000:0000:0000:c8be:4dff:fedf:9790";

std::string v4gid(int a, int b, int c, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", a, b, c, d);
  return buf;
}

class FakeIb : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("spark_fake_ib_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A device with one port and an 8-entry GID table of unused entries.
  void device(const std::string& dev, const std::string& pci_bdf = "") {
    auto p = root_ / dev / "ports" / "1";
    fs::create_directories(p / "gids");
    fs::create_directories(p / "gid_attrs" / "types");
    fs::create_directories(p / "gid_attrs" / "ndevs");
    for (int i = 0; i < 8; ++i) std::ofstream(p / "gids" / std::to_string(i)) << kZero << "\n";
    if (!pci_bdf.empty()) {
      fs::create_directories(root_ / "pci" / pci_bdf);
      fs::create_directory_symlink(root_ / "pci" / pci_bdf, root_ / dev / "device");
    }
  }
  void gid(const std::string& dev, int i, const std::string& value, const std::string& type,
           const std::string& ndev) {
    auto p = root_ / dev / "ports" / "1";
    std::ofstream(p / "gids" / std::to_string(i)) << value << "\n";
    std::ofstream(p / "gid_attrs" / "types" / std::to_string(i)) << type << "\n";
    std::ofstream(p / "gid_attrs" / "ndevs" / std::to_string(i)) << ndev << "\n";
  }
  std::vector<RdmaFunction> list(const std::vector<NetdevAddress>& addrs,
                                 std::vector<std::string>* skipped = nullptr) {
    return rdma_functions(root_.string(), addrs, skipped);
  }
  fs::path root_;
};

NetdevAddress addr(const std::string& dev, const std::string& ip, int prefix) {
  return {dev, parse_ipv4(ip, "test"), prefix};
}

}  // namespace

// The issue-11 case on Soft-RoCE: two rxe devices on two dummy interfaces in two subnets.
TEST_F(FakeIb, TwoRxeDevicesOnTwoSubnets) {
  device("rxe1");
  device("rxe0");
  for (const char* d : {"rxe0", "rxe1"})
    gid(d, 0, kLinkLocal, "RoCE v2", d[3] == '0' ? "d0" : "d1");
  gid("rxe0", 1, v4gid(10, 50, 0, 1), "RoCE v2", "d0");
  gid("rxe1", 1, v4gid(10, 50, 1, 1), "RoCE v2", "d1");
  auto f = list(
      {addr("eth0", "192.168.1.5", 24), addr("d1", "10.50.1.1", 24), addr("d0", "10.50.0.1", 24)});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].lane, (Lane{"rxe0", 1, parse_ipv4("10.50.0.1", "t"), 24}));
  EXPECT_EQ(f[0].netdev, "d0");
  EXPECT_EQ(f[0].gid_index, 1);
  EXPECT_EQ(f[1].lane, (Lane{"rxe1", 1, parse_ipv4("10.50.1.1", "t"), 24}));
  EXPECT_EQ(encode_lanes({f[0].lane, f[1].lane}), "rxe0,1,10.50.0.1/24;rxe1,1,10.50.1.1/24");
  EXPECT_FALSE(same_subnet(f[0].lane, f[1].lane));
}

// A Spark: both PCIe halves of each QSFP port; the port is the PCI function, the address
// the lowest-index IPv4 RoCE v2 GID (a v1 entry of the same address comes first).
TEST_F(FakeIb, SparkFunctionsGetThePortFromThePciFunction) {
  device("rocep1s0f0", "0000:01:00.0");
  device("rocep1s0f1", "0000:01:00.1");
  device("roceP2p1s0f0", "0002:01:00.0");
  gid("rocep1s0f0", 2, v4gid(10, 1, 0, 1), "IB/RoCE v1", "enp1s0f0np0");
  gid("rocep1s0f0", 3, v4gid(10, 1, 0, 1), "RoCE v2", "enp1s0f0np0");
  gid("rocep1s0f1", 3, v4gid(10, 2, 0, 1), "RoCE v2", "enp1s0f1np1");
  gid("roceP2p1s0f0", 3, v4gid(10, 1, 1, 1), "RoCE v2", "enP2p1s0f0np0");
  auto f = list({addr("enp1s0f0np0", "10.1.0.1", 30), addr("enp1s0f1np1", "10.2.0.1", 30),
                 addr("enP2p1s0f0np0", "10.1.1.1", 30)});
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].lane.name, "roceP2p1s0f0");  // sorted by name ('P' < 'p')
  EXPECT_EQ(f[0].lane.port, 0);
  EXPECT_EQ(f[1].lane, (Lane{"rocep1s0f0", 0, parse_ipv4("10.1.0.1", "t"), 30}));
  EXPECT_EQ(f[1].gid_index, 3);
  EXPECT_EQ(f[1].netdev, "enp1s0f0np0");
  EXPECT_EQ(f[2].lane.port, 1);
  EXPECT_EQ(f[2].lane.prefix, 30);
}

TEST_F(FakeIb, DevicesWithoutAnIpv4RoceV2GidAreSkippedWithAReason) {
  device("rxe0");
  device("rxe1");
  device("rxe2");
  gid("rxe0", 0, kLinkLocal, "RoCE v2", "d0");              // no IPv4 at all
  gid("rxe1", 1, v4gid(10, 50, 1, 1), "IB/RoCE v1", "d1");  // IPv4, but RoCE v1 only
  gid("rxe2", 1, v4gid(10, 50, 2, 1), "RoCE v2", "d2");     // address gone from d2
  std::vector<std::string> skipped;
  auto f = list({addr("d1", "10.50.1.1", 24), addr("d2", "10.50.9.1", 24)}, &skipped);
  EXPECT_TRUE(f.empty());
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_EQ(skipped[0], "rxe0 port 1: no IPv4 RoCE v2 GID (give its interface an IPv4 address)");
  EXPECT_EQ(skipped[1], "rxe1 port 1: no usable IPv4 RoCE v2 GID");
  EXPECT_NE(
      skipped[2].find("rxe2 port 1: RoCE v2 GID 1 is 10.50.2.1 but d2 has no such up address"),
      std::string::npos)
      << skipped[2];
}

TEST_F(FakeIb, TheAddressMustSitOnTheGidsOwnInterface) {
  device("rxe0");
  gid("rxe0", 1, v4gid(10, 50, 0, 1), "RoCE v2", "d0");
  EXPECT_TRUE(list({addr("d9", "10.50.0.1", 24)}).empty());
  auto f = list({addr("d9", "10.50.0.1", 16), addr("d0", "10.50.0.1", 24)});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].lane.prefix, 24);
}

TEST_F(FakeIb, MalformedEntriesAreIgnored) {
  device("rxe0");
  gid("rxe0", 1, "0000:0000:0000:0000:0000:ffff:0a32", "RoCE v2", "d0");  // short
  gid("rxe0", 2, "0000:0000:0000:0000:0000:ffff:0a32:zz01", "RoCE v2", "d0");
  gid("rxe0", 3, v4gid(0, 0, 0, 0), "RoCE v2", "d0");  // ::ffff:0.0.0.0
  std::ofstream(root_ / "rxe0" / "ports" / "1" / "gids" / "x1") << v4gid(10, 50, 0, 1) << "\n";
  fs::create_directories(root_ / "rxe0" / "ports" / "abc");
  EXPECT_TRUE(list({addr("d0", "10.50.0.1", 24)}).empty());
  gid("rxe0", 5, v4gid(10, 50, 0, 1), "RoCE v2", "d0");
  EXPECT_EQ(list({addr("d0", "10.50.0.1", 24)}).size(), 1u);
}

TEST_F(FakeIb, NoInfinibandClassMeansNoRdmaLanes) {
  const auto none = (root_ / "missing").string();
  EXPECT_TRUE(rdma_functions(none, {addr("d0", "10.50.0.1", 24)}).empty());
  EXPECT_TRUE(local_rdma_lanes({}, {}, none).empty());
  EXPECT_TRUE(node_lanes(LaneKind::rdma, {}, {}, none).empty());
  // automatic falls back to the network interfaces, as for tcp
  EXPECT_EQ(node_lanes(LaneKind::automatic, {}, {}, none), local_lanes({}));
  EXPECT_EQ(node_lanes(LaneKind::net, {}, {}, none), local_lanes({}));
}

TEST_F(FakeIb, ANamedDeviceThatIsNoLaneIsRefused) {
  device("rxe0");
  gid("rxe0", 0, kLinkLocal, "RoCE v2", "d0");
  try {
    local_rdma_lanes({"rxe0"}, {}, root_.string());
    FAIL() << "expected ConfigError";
  } catch (const spark::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("RDMA device rxe0 is not a usable lane; rxe0 port 1: no "
                                         "IPv4 RoCE v2 GID"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(local_rdma_lanes({"mlx5_9"}, {}, root_.string()), spark::ConfigError);
}

TEST(RdmaDevices, StrictParsing) {
  EXPECT_EQ(parse_rdma_devices("rxe0", "SPARK_LANES"), (std::vector<std::string>{"rxe0"}));
  EXPECT_EQ(parse_rdma_devices("rocep1s0f0:1,roceP2p1s0f0", "SPARK_IB_HCA"),
            (std::vector<std::string>{"rocep1s0f0", "roceP2p1s0f0"}));
  for (const char* bad :
       {"", ",", "rxe0,", ",rxe0", "^rxe0", "=rxe0", "rxe0:2", "rxe0:", "rx e0", "rxe0;rxe1"})
    EXPECT_THROW(parse_rdma_devices(bad, "SPARK_IB_HCA"), spark::ConfigError) << "'" << bad << "'";
  try {
    parse_rdma_devices("^mlx5_0", "SPARK_IB_HCA");
  } catch (const spark::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("SPARK_IB_HCA=\"^mlx5_0\""), std::string::npos);
  }
}
