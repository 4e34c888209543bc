#include "host_checks.hpp"

#include <dlfcn.h>
#include <hwloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fabric/rdma_lanes.hpp"
#include "spark/protocol/number.hpp"

#ifdef SPARK_DOCTOR_HAVE_VERBS
#include <infiniband/verbs.h>

#include "verbs/gid.hpp"
#include "verbs/limits.hpp"
#include "verbs/qp.hpp"
#endif
#ifdef SPARK_DOCTOR_HAVE_PMIX
#include <pmix.h>
#endif

namespace spark::doctor {
namespace fs = std::filesystem;

namespace {

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

std::vector<Row> evaluate(const HostFacts& f, int expect_mtu) {
  std::vector<Row> rows;
  if (!f.verbs_built) {
    rows.push_back({"rdma devices", "-", Status::fail,
                    "sparkrun was built without libibverbs: install libibverbs-dev and rebuild"});
  } else if (f.devices.empty()) {
    rows.push_back({"rdma devices", "-", Status::fail,
                    f.no_device.empty() ? "no RDMA device found" : f.no_device});
  }
  for (const DeviceFacts& d : f.devices) {
    if (!d.error.empty() && d.port_state.empty()) {
      rows.push_back({"rdma device", d.name, Status::fail, d.error});
      continue;
    }
    rows.push_back(
        {"link state", d.name, d.port_state == "ACTIVE" ? Status::ok : Status::fail,
         "port 1 " + d.port_state + (d.link_layer.empty() ? "" : ", " + d.link_layer) +
             (d.port_state == "ACTIVE" ? "" : ": check the cable and `ip link set <netdev> up`")});
    if (d.gid_index >= 0) {
      rows.push_back({"RoCE v2 GID", d.name, Status::ok,
                      "index " + std::to_string(d.gid_index) + " " + d.gid});
    } else {
      rows.push_back(
          {"RoCE v2 GID", d.name, Status::fail, d.error.empty() ? "no IPv4 RoCE v2 GID" : d.error});
    }
    std::string nd = d.netdev.empty() ? "netdev ?" : d.netdev;
    if (d.netdev_mtu == 0) {
      rows.push_back({"MTU", d.name, Status::warn,
                      nd + " MTU unknown, path MTU " + std::to_string(d.active_mtu) +
                          " (expected " + std::to_string(expect_mtu) + ")"});
    } else if (d.netdev_mtu < expect_mtu) {
      rows.push_back({"MTU", d.name, Status::warn,
                      nd + " MTU " + std::to_string(d.netdev_mtu) + ", path MTU " +
                          std::to_string(d.active_mtu) + ": expected " +
                          std::to_string(expect_mtu) + " (ip link set " +
                          (d.netdev.empty() ? std::string("DEV") : d.netdev) + " mtu " +
                          std::to_string(expect_mtu) + " on every node; a reboot can reset it)"});
    } else {
      rows.push_back({"MTU", d.name, Status::ok,
                      nd + " MTU " + std::to_string(d.netdev_mtu) + ", path MTU " +
                          std::to_string(d.active_mtu)});
    }
  }
  if (!f.memlock) {
    rows.push_back({"locked memory", "ulimit -l", Status::ok, "unlimited"});
  } else if (*f.memlock < kMinMemlock) {
    rows.push_back(
        {"locked memory", "ulimit -l", Status::fail,
         mib(*f.memlock) + " (need >= " + mib(kMinMemlock) +
             "): `ulimit -l unlimited`, `* - memlock unlimited` in /etc/security/limits.conf, "
             "or LimitMEMLOCK=infinity in the systemd unit"});
  } else {
    rows.push_back({"locked memory", "ulimit -l", Status::ok, mib(*f.memlock)});
  }
  for (const std::string& p : f.env_problems)
    rows.push_back({"environment", "SPARK_*", Status::fail, p});
  rows.push_back(
      {"library", "PMIx", f.pmix.empty() ? Status::warn : Status::ok,
       f.pmix.empty() ? "not built in (apt-get install libpmix-dev and rebuild)" : f.pmix});
  rows.push_back({"library", "hwloc", f.hwloc.empty() ? Status::warn : Status::ok,
                  f.hwloc.empty() ? "unknown" : f.hwloc});
  rows.push_back({"library", "rdma-core", f.rdma_core.empty() ? Status::warn : Status::ok,
                  f.rdma_core.empty() ? "libibverbs not found" : f.rdma_core});
  return rows;
}

std::string render(const std::vector<Row>& rows) {
  std::size_t w0 = 5, w1 = 4, w2 = 6;
  for (const Row& r : rows) {
    w0 = std::max(w0, r.check.size());
    w1 = std::max(w1, r.item.size());
  }
  auto pad = [](const std::string& s, std::size_t w) {
    return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
  };
  std::string out =
      pad("CHECK", w0) + "  " + pad("ITEM", w1) + "  " + pad("STATUS", w2) + "  DETAIL\n";
  for (const Row& r : rows)
    out += pad(r.check, w0) + "  " + pad(r.item, w1) + "  " + pad(status_text(r.status), w2) +
           "  " + r.detail + "\n";
  return out + verdict(rows).line();
}

HostFacts gather(const std::string& sysfs) {
  HostFacts f;
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) f.memlock = rl.rlim_cur;
  {
    unsigned v = hwloc_get_api_version();
    f.hwloc = "API " + std::to_string(v >> 16) + "." + std::to_string((v >> 8) & 0xff) + "." +
              std::to_string(v & 0xff);
    // The release is not queryable at run time; the library file names its soname version.
    if (Dl_info info{};
        dladdr(reinterpret_cast<void*>(&hwloc_get_api_version), &info) != 0 && info.dli_fname) {
      std::error_code ec;
      std::string real = fs::canonical(info.dli_fname, ec).filename().string();
      if (!real.empty()) f.hwloc += " (" + real + ")";
    }
  }
#ifdef SPARK_DOCTOR_HAVE_PMIX
  f.pmix = PMIx_Get_version();
#endif
#ifdef SPARK_DOCTOR_HAVE_VERBS
  // rdma-core has no version call: the file name of the loaded libibverbs carries it
  // (libibverbs.so.1.14.44.0 = rdma-core 44).
  if (Dl_info info{};
      dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) != 0 && info.dli_fname) {
    std::error_code ec;
    std::string real = fs::canonical(info.dli_fname, ec).filename().string();
    f.rdma_core = real.empty() ? info.dli_fname : real;
    if (auto pos = real.rfind(".so.1."); pos != std::string::npos) {
      std::string rest = real.substr(pos + 6);  // "14.44.0"
      if (auto dot = rest.find('.'); dot != std::string::npos) {
        std::string major = rest.substr(dot + 1, rest.find('.', dot + 1) - dot - 1);
        f.rdma_core = "rdma-core " + major + " (" + real + ")";
      }
    }
  }
#ifdef SPARK_DOCTOR_IBVERBS_BUILD_VERSION
  if (f.rdma_core.find("rdma-core") == std::string::npos) {
    // A copied library (no version in its name): say what sparkrun was built against.
    f.rdma_core += std::string(f.rdma_core.empty() ? "" : ", ") + "built against libibverbs " +
                   SPARK_DOCTOR_IBVERBS_BUILD_VERSION;
  }
#endif
  std::optional<std::string> gid_override;
  if (const char* g = std::getenv("SPARK_IB_GID_INDEX")) {
    try {
      verbs::parse_gid_index(g);
      gid_override = g;
    } catch (const std::exception& e) {
      f.env_problems.push_back(e.what());
    }
  }
  for (const char* var : {"SPARK_IB_HCA", "SPARK_LANES"}) {
    if (const char* v = std::getenv(var)) {
      try {
        spark::fabric::parse_rdma_devices(v, var);
      } catch (const std::exception& e) {
        f.env_problems.push_back(e.what());
      }
    }
  }
  int err = 0;
  verbs::DeviceList list(&err);
  if (list.size() == 0) f.no_device = verbs::no_device_message(err, "");
  const std::string ib_root = sysfs + "/class/infiniband";
  for (int i = 0; i < list.size(); ++i) {
    DeviceFacts d;
    d.name = ibv_get_device_name(list[i]);
    try {
      const verbs::PortInfo port = verbs::query_port(verbs::open_device(d.name), 1);
      d.port_state = port.state == IBV_PORT_ACTIVE ? "ACTIVE" : ibv_port_state_str(port.state);
      for (char& c : d.port_state)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      d.link_layer = port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
      d.active_mtu = verbs::mtu_bytes(port.active_mtu);
    } catch (const std::exception& e) {
      d.error = e.what();
    }
    try {
      verbs::GidChoice g = verbs::select_gid(ib_root, d.name, 1, gid_override);
      d.gid_index = g.index;
      d.gid = verbs::gid_text(g.gid);
      d.netdev = first_line(fs::path(ib_root) / d.name / "ports/1/gid_attrs/ndevs" /
                            std::to_string(g.index));
    } catch (const std::exception& e) {
      if (d.error.empty()) d.error = e.what();
    }
    if (d.netdev.empty()) {
      // Without a GID the netdev is still named by the device's "net" folder (mlx5) if any.
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(fs::path(ib_root) / d.name / "device/net", ec)) {
        d.netdev = e.path().filename().string();
        break;
      }
    }
    if (!d.netdev.empty()) {
      std::string m = first_line(fs::path(sysfs) / "class/net" / d.netdev / "mtu");
      std::int64_t v = 0;
      if (protocol::parse_integer(m, 0, INT32_MAX, v) == protocol::Integer::ok)
        d.netdev_mtu = static_cast<int>(v);
    }
    f.devices.push_back(std::move(d));
  }
#else
  f.verbs_built = false;
  (void)sysfs;
#endif
  return f;
}

}  // namespace spark::doctor
