// The live machine: real discovery, real binding (read back from /proc/self/status in a child),
// and the injectable /proc + /sys root.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/plan.hpp"

namespace spark::topo {
namespace {

std::string allowed_list_of_self() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      auto pos = line.find_first_not_of(" \t", 18);
      return pos == std::string::npos ? "" : line.substr(pos);
    }
  }
  return "";
}

// Forks, applies `set` in the child, and returns what the child's /proc/self/status says.
std::string bound_child(const cpu_set_t& set) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int rc = apply_cpu_set(set);
    std::string got = rc == 0 ? allowed_list_of_self() : "errno " + std::to_string(rc);
    ssize_t ignored = write(fds[1], got.data(), got.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return out;
}

TEST(LiveTopology, LoadsThisSystem) {
  Topology t = Topology::load(LoadOptions{});
  EXPECT_TRUE(t.is_this_system());
  MachineInfo m = machine_info(t);
  EXPECT_EQ(format_cpu_list(m.cpus), allowed_list_of_self());
  EXPECT_FALSE(m.cores.empty());
  std::string text = describe(m);
  EXPECT_NE(text.find("machine: this machine\n"), std::string::npos) << text;
}

TEST(LiveTopology, NoNicFoundHere) {
  MachineInfo m = machine_info(Topology::load(LoadOptions{}));
  if (!m.lanes.empty()) GTEST_SKIP() << "this machine has a Mellanox NIC: " << m.lanes[0].name;
  Plan p = make_plan(m, PlanOptions{});
  EXPECT_TRUE(p.applies_here);
  EXPECT_EQ(p.notes, std::vector<std::string>{"no NIC found, binding by core speed only"});
}

TEST(LiveBinding, ChildIsReallyBound) {
  MachineInfo m = machine_info(Topology::load(LoadOptions{}));
  if (m.cores.size() < 2) GTEST_SKIP() << "needs at least 2 cores to tell binding apart";
  PlanOptions o;
  o.local_ranks = static_cast<int>(m.cores.size());
  o.bind_to = BindTo::core;
  Plan p = make_plan(m, o);
  for (const auto& r : p.ranks) {
    cpu_set_t set;
    ASSERT_TRUE(to_cpu_set(r, set));
    EXPECT_EQ(bound_child(set), r.cpuset) << "rank " << r.local_rank;
  }
  // The parent itself is untouched.
  EXPECT_EQ(allowed_list_of_self(), format_cpu_list(m.cpus));
}

TEST(LiveTopology, RespectsOwnBinding) {
  MachineInfo all = machine_info(Topology::load(LoadOptions{}));
  if (all.cpus.size() < 2) GTEST_SKIP() << "needs at least 2 cpus";
  const int last = all.cpus.back();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {  // bound to the last cpu, as under `taskset -c N sparkrun`
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(last, &set);
    std::string got = "bind failed";
    // Every thread of the process, as `taskset -a` (or a binding set before exec) does:
    // hwloc's process binding is the union of its threads' bindings, and under qemu-user the
    // process also holds the emulator's own (RCU) thread, which binding only this thread
    // would leave on every cpu ("0-1" where one cpu is expected).
    bool bound = true;
    if (DIR* d = opendir("/proc/self/task")) {
      while (const dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        bound = bound && sched_setaffinity(std::atoi(e->d_name), sizeof set, &set) == 0;
      }
      closedir(d);
    } else {
      bound = sched_setaffinity(0, sizeof set, &set) == 0;
    }
    if (bound) {
      LoadOptions o;
      o.with_io = false;
      got = format_cpu_list(machine_info(Topology::load(o)).cpus);
    }
    ssize_t ignored = write(fds[1], got.data(), got.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  char buf[64];
  ssize_t n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), std::to_string(last));
}

TEST(LiveProbe, InjectedSysfsRootOverrulesCpukinds) {
  // A fake /proc and /sys: cpu0 an A725, cpu1 an X925. hwloc's live cpukinds (one kind here)
  // disagree, so the MIDR part numbers decide.
  MachineInfo real = machine_info(Topology::load(LoadOptions{}));
  if (real.cpus.size() != 2) GTEST_SKIP() << "written for a 2-cpu machine";
  auto root = std::filesystem::temp_directory_path() / ("spark-topo-" + std::to_string(getpid()));
  std::filesystem::create_directories(root / "proc");
  {
    std::ofstream info(root / "proc/cpuinfo");
    info << "processor\t: " << real.cpus[0] << "\nCPU implementer\t: 0x41\nCPU part\t: 0xd87\n\n"
         << "processor\t: " << real.cpus[1] << "\nCPU implementer\t: 0x41\nCPU part\t: 0xd85\n\n";
  }
  for (int i = 0; i < 2; ++i) {
    auto dir = root / ("sys/devices/system/cpu/cpu" + std::to_string(real.cpus[i]));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cpu_capacity") << (i == 0 ? "718\n" : "1024\n");
  }
  LoadOptions o;
  o.with_io = false;
  o.sysfs_root = root;
  MachineInfo m = machine_info(Topology::load(o));
  std::filesystem::remove_all(root);
  EXPECT_EQ(m.decision.source, "MIDR part number");
  ASSERT_EQ(m.kinds.size(), 2u);
  EXPECT_EQ(m.kinds[0].name, "Cortex-X925");
  EXPECT_EQ(m.kinds[0].cpus, std::vector<int>{real.cpus[1]});
  EXPECT_FALSE(m.io_probed);
  EXPECT_NE(make_plan(m, PlanOptions{}).notes.at(0).find("NICs not probed"), std::string::npos);
}

}  // namespace
}  // namespace spark::topo

namespace spark::topo {
namespace {

// A fake sysfs with a Spark's four CX7 functions and its GPU: the live machine's NIC discovery
// (sysfs, not hwloc's PCI scan) finds them, with names, PCIe links and locality.
TEST(LiveProbe, NicsFromInjectedSysfs) {
  auto root = std::filesystem::temp_directory_path() / ("spark-nic-" + std::to_string(getpid()));
  auto dev = [&](const std::string& bdf, const char* vendor, const char* cls, const char* rdma,
                 const char* net) {
    auto d = root / "sys/bus/pci/devices" / bdf;
    std::filesystem::create_directories(d);
    std::ofstream(d / "vendor") << vendor << "\n";
    std::ofstream(d / "class") << cls << "\n";
    std::ofstream(d / "device") << "0x1021\n";
    std::ofstream(d / "local_cpulist") << "0-19\n";
    if (rdma != nullptr) std::filesystem::create_directories(d / "infiniband" / rdma);
    if (net != nullptr) std::filesystem::create_directories(d / "net" / net);
  };
  dev("0000:01:00.0", "0x15b3", "0x020000", "rocep1s0f0", "enp1s0f0np0");
  dev("0000:01:00.1", "0x15b3", "0x020000", "rocep1s0f1", "enp1s0f1np1");
  dev("0002:01:00.0", "0x15b3", "0x020000", "roceP2p1s0f0", "enP2p1s0f0np0");
  dev("0002:01:00.1", "0x15b3", "0x020000", "roceP2p1s0f1", "enP2p1s0f1np1");
  dev("0007:01:00.0", "0x10ec", "0x020000", nullptr, "enP7s7");  // the 10 GbE port: not a lane
  dev("000f:01:00.0", "0x10de", "0x030000", nullptr, nullptr);
  std::filesystem::create_directories(root / "sys/bus/pci/devices/000f:01:00.0/drm/card1");
  std::filesystem::create_directories(root / "sys/bus/pci/devices/not-a-bdf");

  LoadOptions o;
  o.sysfs_root = root;
  MachineInfo m = machine_info(Topology::load(o));
  std::filesystem::remove_all(root);
  ASSERT_EQ(m.lanes.size(), 4u);
  EXPECT_EQ(m.lanes[2].name, "roceP2p1s0f0");
  EXPECT_EQ(m.lanes[2].net, "enP2p1s0f0np0");
  EXPECT_EQ(m.lanes[2].link, "0002:01");
  EXPECT_EQ(m.lanes[3].function, 1);
  EXPECT_EQ(m.lanes[0].near_cpus, m.cpus);  // local_cpulist 0-19 clipped to this machine
  ASSERT_EQ(m.gpus.size(), 1u);
  EXPECT_EQ(m.gpus[0].name, "PCI [10de:1021]");
  EXPECT_EQ(m.gpus[0].osdev, "card1");
  Plan p = make_plan(m, PlanOptions{});
  EXPECT_EQ(p.ranks[0].lanes, (std::vector<std::string>{"rocep1s0f0", "roceP2p1s0f0"}));
  EXPECT_TRUE(p.notes.empty());
}

}  // namespace
}  // namespace spark::topo
