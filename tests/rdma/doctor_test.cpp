// `sparkrun doctor`'s judgement, with made-up host facts (no RDMA device needed).
#include <gtest/gtest.h>

#include "host_checks.hpp"

using namespace spark::doctor;

namespace {

HostFacts healthy() {
  HostFacts f;
  DeviceFacts d;
  d.name = "rocep1s0f0";
  d.port_state = "ACTIVE";
  d.link_layer = "Ethernet";
  d.active_mtu = 4096;
  d.netdev = "enp1s0f0np0";
  d.netdev_mtu = 9000;
  d.gid_index = 3;
  d.gid = "::ffff:10.0.0.1";
  f.devices.push_back(d);
  f.memlock = std::nullopt;
  f.pmix = "OpenPMIx 4.2.2";
  f.hwloc = "2.9.0";
  f.rdma_core = "rdma-core 44";
  return f;
}

const Row* find(const std::vector<Row>& rows, const std::string& check) {
  for (const Row& r : rows)
    if (r.check == check) return &r;
  return nullptr;
}

}  // namespace

TEST(Doctor, HealthyHostExitsZero) {
  auto rows = evaluate(healthy());
  EXPECT_EQ(verdict(rows).exit_code(), 0) << render(rows);
  EXPECT_NE(render(rows).find("all well"), std::string::npos);
  EXPECT_NE(render(rows).find("index 3 ::ffff:10.0.0.1"), std::string::npos);
}

TEST(Doctor, NoDeviceSaysSoPlainlyAndChecksTheRest) {
  HostFacts f = healthy();
  f.devices.clear();
  f.no_device = "no RDMA device found: ibv_get_device_list failed: Function not implemented";
  auto rows = evaluate(f);
  EXPECT_EQ(verdict(rows).exit_code(), 2);
  const Row* r = find(rows, "rdma devices");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, Status::fail);
  EXPECT_NE(r->detail.find("no RDMA device found"), std::string::npos);
  EXPECT_NE(find(rows, "locked memory"), nullptr);  // the rest is still checked
  EXPECT_NE(render(rows).find("PMIx"), std::string::npos);
}

TEST(Doctor, Mtu1500IsAWarningWithTheFix) {
  HostFacts f = healthy();
  f.devices[0].netdev_mtu = 1500;
  f.devices[0].active_mtu = 1024;
  auto rows = evaluate(f);
  const Row* r = find(rows, "MTU");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, Status::warn);
  EXPECT_NE(r->detail.find("ip link set enp1s0f0np0 mtu 9000"), std::string::npos) << r->detail;
  EXPECT_EQ(verdict(rows).exit_code(), 1);
  EXPECT_EQ(verdict(evaluate(f, 1500)).exit_code(), 0);  // --expect-mtu 1500
}

TEST(Doctor, LowMemlockFailsWithTheFix) {
  HostFacts f = healthy();
  f.memlock = 8ull << 20;
  const Row* r = nullptr;
  auto rows = evaluate(f);
  r = find(rows, "locked memory");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, Status::fail);
  EXPECT_NE(r->detail.find("8 MiB"), std::string::npos);
  EXPECT_NE(r->detail.find("limits.conf"), std::string::npos);
}

TEST(Doctor, PortDownAndMissingGidFail) {
  HostFacts f = healthy();
  f.devices[0].port_state = "DOWN";
  f.devices[0].gid_index = -1;
  f.devices[0].error = "no IPv4 RoCE v2 GID on rocep1s0f0 port 1";
  auto rows = evaluate(f);
  EXPECT_EQ(find(rows, "link state")->status, Status::fail);
  EXPECT_EQ(find(rows, "RoCE v2 GID")->status, Status::fail);
  EXPECT_NE(find(rows, "RoCE v2 GID")->detail.find("no IPv4 RoCE v2 GID"), std::string::npos);
}

TEST(Doctor, BadEnvironmentIsReported) {
  HostFacts f = healthy();
  f.env_problems.push_back("SPARK_IB_GID_INDEX=\"\" is not a GID index");
  auto rows = evaluate(f);
  EXPECT_EQ(verdict(rows).exit_code(), 2);
  EXPECT_EQ(find(rows, "environment")->status, Status::fail);
}
