// `sparkrun doctor`'s host checks (spark_doctor_probe --host-checks, and the first rank of each
// host in a job): read-only checks of this host's RDMA setup and libraries, as a table. Facts
// are gathered from the live system (verbs, sysfs, getrlimit, library versions) and judged by
// pure functions, so the judgement is unit-tested with made-up facts (docs/doctor.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spark/protocol/doctor_exit.hpp"

namespace spark::doctor {

struct DeviceFacts {
  std::string name;        ///< e.g. "rocep1s0f0"
  std::string port_state;  ///< "ACTIVE", "DOWN", ... ("" when the query failed)
  std::string link_layer;  ///< "Ethernet" / "InfiniBand"
  int active_mtu = 0;      ///< path MTU in bytes (256..4096)
  std::string netdev;      ///< e.g. "enp1s0f0np0" ("" when unknown)
  int netdev_mtu = 0;      ///< interface MTU (0 when unknown)
  int gid_index = -1;      ///< chosen IPv4 RoCE v2 GID (-1: none)
  std::string gid;         ///< its value, e.g. "::ffff:10.0.0.1"
  std::string error;       ///< why a fact is missing (GID lookup, query failure)
};

struct HostFacts {
  bool verbs_built = true;  ///< sparkrun was built with libibverbs
  std::vector<DeviceFacts> devices;
  std::string no_device;                  ///< the plain message when there is no RDMA device
  std::optional<std::uint64_t> memlock;   ///< RLIMIT_MEMLOCK soft limit (nullopt = unlimited)
  std::string pmix, hwloc, rdma_core;     ///< versions ("" = not available)
  std::vector<std::string> env_problems;  ///< invalid SPARK_IB_* / SPARK_LANES values
};

enum class Status { ok, warn, fail, info };

/// "ok", "WARN", "FAIL", "info": the RESULT column of every doctor table.
inline const char* status_text(Status s) {
  constexpr const char* kText[] = {"ok", "WARN", "FAIL", "info"};
  return kText[static_cast<int>(s)];
}

struct Row {
  std::string check, item;
  Status status = Status::ok;
  std::string detail;
};

/// The judgement of a doctor table (host checks or the job table, any rows with a `status`):
/// how many rows are FAIL and WARN, the one-line verdict under the table, and the exit status.
struct Verdict {
  int fails = 0, warns = 0;
  /// "sparkrun doctor: all well" or "sparkrun doctor: N problem(s), M warning(s)", with "\n".
  std::string line() const {
    if (fails == 0 && warns == 0) return "sparkrun doctor: all well\n";
    return "sparkrun doctor: " + std::to_string(fails) + " problem(s), " + std::to_string(warns) +
           " warning(s)\n";
  }
  /// `sparkrun doctor`'s exit status: 0 all well, 1 warnings only, 2 a failure.
  int exit_code() const {
    namespace e = protocol::doctor_exit;
    return fails > 0 ? e::failures : warns > 0 ? e::warnings : e::ok;
  }
  /// What the probe exits with for this verdict (protocol/doctor_exit.hpp).
  int probe_status() const { return protocol::doctor_exit::probe_status(fails, warns); }
};

/// The verdict of any table whose rows have a `status` (Row, JobRow).
template <class Rows>
Verdict verdict(const Rows& rows) {
  Verdict v;
  for (const auto& r : rows) {
    v.fails += r.status == Status::fail;
    v.warns += r.status == Status::warn;
  }
  return v;
}

/// Locked memory below this is reported as a failure (two lanes x two peers of mailboxes
/// and staging need tens of MiB).
inline constexpr std::uint64_t kMinMemlock = 64ull << 20;

/// The checks, one row each. `expect_mtu`: the interface MTU a Spark fabric uses (9000).
std::vector<Row> evaluate(const HostFacts& facts, int expect_mtu = 9000);
/// Fixed-width table plus its verdict line; the exit status is verdict(rows).exit_code().
std::string render(const std::vector<Row>& rows);

/// Gathers facts from the live host; `sysfs` is /sys (tests inject a fake tree).
HostFacts gather(const std::string& sysfs = "/sys");

}  // namespace spark::doctor
