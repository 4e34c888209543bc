// --nccl-env's rule (launcher/src/node/nccl_env.cpp) on the DGX Spark hwloc fixture
// (tests/data/spark.xml: rocep1s0f0/f1 on 0000:01, roceP2p1s0f0/f1 on 0002:01) with fake
// /sys/class/infiniband trees written per test, since this machine has no RDMA device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "nccl_env.hpp"
#include "spark/topo/plan.hpp"

namespace spark::launch {
namespace {

namespace fs = std::filesystem;

topo::MachineInfo spark() {
  topo::LoadOptions load;
  load.xml_path = SPARK_TOPO_DATA_DIR "/spark.xml";
  return topo::machine_info(topo::Topology::load(load));
}
std::vector<topo::Lane> spark_lanes() {
  return spark().lanes;
}

// A fake infiniband class directory, removed at the end of the test.
class IbTree {
 public:
  IbTree() : root_(fs::temp_directory_path() / ("spark-ncclenv-" + std::to_string(getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~IbTree() { fs::remove_all(root_); }
  // GID entry `index` of dev port 1.
  void gid(const std::string& dev, int index, const std::string& gid, const std::string& type) {
    const fs::path port = root_ / dev / "ports" / "1";
    fs::create_directories(port / "gids");
    fs::create_directories(port / "gid_attrs" / "types");
    std::ofstream(port / "gids" / std::to_string(index)) << gid << "\n";
    std::ofstream(port / "gid_attrs" / "types" / std::to_string(index)) << type << "\n";
  }
  // The usual CX7 table: link-local IPv6 at 0 (v1) and 1 (v2), the IPv4 address at 2 (v1)
  // and 3 (v2), unless `v2` says otherwise.
  void cx7(const std::string& dev, const std::string& ipv4_hex, int v2 = 3) {
    gid(dev, 0, "fe80:0000:0000:0000:0e42:a1ff:fe00:0001", "IB/RoCE v1");
    gid(dev, 1, "fe80:0000:0000:0000:0e42:a1ff:fe00:0001", "RoCE v2");
    gid(dev, v2 - 1, "0000:0000:0000:0000:0000:ffff:" + ipv4_hex, "IB/RoCE v1");
    gid(dev, v2, "0000:0000:0000:0000:0000:ffff:" + ipv4_hex, "RoCE v2");
  }
  std::string path() const { return root_.string(); }

 private:
  fs::path root_;
};

std::string value(const NcclEnv& e, const std::string& name) {
  for (const auto& [k, v] : e.vars) {
    if (k == name) return v;
  }
  return "<unset>";
}

TEST(NcclEnv, BothHalvesAndTheRoceV2GidIndex) {
  IbTree ib;
  ib.cx7("rocep1s0f0", "0a32:0001");
  ib.cx7("roceP2p1s0f0", "0a32:0101");
  const auto lanes = spark_lanes();
  NcclEnv e = nccl_env(lanes, {"rocep1s0f0", "roceP2p1s0f0"}, "enP7s7", ib.path());
  EXPECT_EQ(value(e, "NCCL_IB_HCA"), "=rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(value(e, "NCCL_IB_GID_INDEX"), "3");
  EXPECT_EQ(value(e, "NCCL_SOCKET_IFNAME"), "enP7s7");
  EXPECT_EQ(value(e, "GLOO_SOCKET_IFNAME"), "enP7s7");
  EXPECT_TRUE(e.notes.empty()) << e.notes.front();
  ASSERT_EQ(e.vars.size(), 4u);
  EXPECT_EQ(e.vars[0].first, "NCCL_IB_HCA");  // documented order
}

TEST(NcclEnv, GidIndexIsResolvedPerNodeNotFixed) {
  IbTree ib;  // another node: the IPv4 RoCE v2 entry sits at 5
  ib.cx7("rocep1s0f1", "0a33:0001", 5);
  ib.cx7("roceP2p1s0f1", "0a33:0101", 5);
  NcclEnv e = nccl_env(spark_lanes(), {"rocep1s0f1", "roceP2p1s0f1"}, "lo", ib.path());
  EXPECT_EQ(value(e, "NCCL_IB_HCA"), "=rocep1s0f1,roceP2p1s0f1");
  EXPECT_EQ(value(e, "NCCL_IB_GID_INDEX"), "5");
}

TEST(NcclEnv, DevicesWithDifferentIndicesLetNcclPickPerDevice) {
  IbTree ib;
  ib.cx7("rocep1s0f0", "0a32:0001", 3);
  ib.cx7("roceP2p1s0f0", "0a32:0101", 7);
  NcclEnv e = nccl_env(spark_lanes(), {"rocep1s0f0", "roceP2p1s0f0"}, "lo", ib.path());
  EXPECT_EQ(value(e, "NCCL_IB_GID_INDEX"), "<unset>");
  EXPECT_EQ(value(e, "NCCL_IB_ROCE_VERSION_NUM"), "2");
  EXPECT_EQ(value(e, "NCCL_IB_ADDR_FAMILY"), "AF_INET");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("rocep1s0f0 at 3, roceP2p1s0f0 at 7"), std::string::npos) << e.notes[0];
}

TEST(NcclEnv, DeviceWithoutIpv4RoceV2GidIsNamed) {
  IbTree ib;
  ib.cx7("rocep1s0f0", "0a32:0001");
  ib.gid("roceP2p1s0f0", 0, "fe80:0000:0000:0000:0e42:a1ff:fe00:0002", "RoCE v2");  // no IPv4
  NcclEnv e = nccl_env(spark_lanes(), {"rocep1s0f0", "roceP2p1s0f0"}, "lo", ib.path());
  EXPECT_EQ(value(e, "NCCL_IB_GID_INDEX"), "3");  // from the device that has one
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("no GID index for roceP2p1s0f0: no IPv4 RoCE v2 GID"),
            std::string::npos)
      << e.notes[0];
}

TEST(NcclEnv, NoRdmaDeviceStillSetsTheSocketsAndSaysSo) {
  NcclEnv e = nccl_env({}, {}, "lo", "/nonexistent");
  EXPECT_EQ(value(e, "NCCL_IB_HCA"), "<unset>");
  EXPECT_EQ(value(e, "NCCL_IB_GID_INDEX"), "<unset>");
  EXPECT_EQ(value(e, "NCCL_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(value(e, "GLOO_SOCKET_IFNAME"), "lo");
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("no RDMA device found"), std::string::npos) << e.notes[0];
}

TEST(NcclEnv, HalvesAreTheSameFunctionInTheOtherPciDomain) {
  const auto lanes = spark_lanes();
  ASSERT_EQ(lanes.size(), 4u);
  for (const auto& l : lanes) {
    const auto other = other_halves(lanes, l);
    ASSERT_EQ(other.size(), 1u) << l.name;
    const std::map<std::string, std::string> pair = {{"rocep1s0f0", "roceP2p1s0f0"},
                                                     {"roceP2p1s0f0", "rocep1s0f0"},
                                                     {"rocep1s0f1", "roceP2p1s0f1"},
                                                     {"roceP2p1s0f1", "rocep1s0f1"}};
    EXPECT_EQ(other[0], pair.at(l.name));
  }
}

TEST(NcclEnv, OneHalfNamedGetsTheNote) {
  const auto m = spark();
  auto note = one_half_note(m, "NCCL_IB_HCA", "rocep1s0f0");
  ASSERT_TRUE(note);
  EXPECT_EQ(*note,
            "NCCL_IB_HCA=rocep1s0f0 names one PCIe half of a CX7 port (rocep1s0f0); name both "
            "(rocep1s0f0,roceP2p1s0f0) for full bandwidth (~24 vs ~3 GB/s)");
  EXPECT_FALSE(one_half_note(m, "NCCL_IB_HCA", "rocep1s0f0,roceP2p1s0f0"));
  EXPECT_FALSE(one_half_note(m, "NCCL_IB_HCA", "=rocep1s0f0:1,roceP2p1s0f0:1"));
  EXPECT_FALSE(one_half_note(m, "SPARK_IB_HCA", "roce"));   // a prefix: all four
  EXPECT_FALSE(one_half_note(m, "NCCL_IB_HCA", "mlx5_0"));  // names nothing here: no note
  auto two = one_half_note(m, "SPARK_IB_HCA", "^roceP2p1s0f1");
  ASSERT_TRUE(two);
  EXPECT_NE(two->find("SPARK_IB_HCA=^roceP2p1s0f1 names one PCIe half of a CX7 port "
                      "(rocep1s0f1); name both (rocep1s0f1,roceP2p1s0f1)"),
            std::string::npos)
      << *two;
}

TEST(NcclEnv, DefaultRouteInterfaceFromProcNetRoute) {
  const fs::path root = fs::temp_directory_path() / ("spark-ncclroute-" + std::to_string(getpid()));
  fs::create_directories(root / "net");
  std::ofstream(root / "net" / "route")
      << "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "enP7s7\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
         "enP7s7\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
  EXPECT_EQ(default_route_interface(root), "enP7s7");
  std::ofstream(root / "net" / "route") << "Iface\tDestination\n";
  EXPECT_EQ(default_route_interface(root), "");
  fs::remove_all(root);
}

}  // namespace
}  // namespace spark::launch
