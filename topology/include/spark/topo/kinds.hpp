// Deciding core kinds from several sources that may disagree: hwloc cpukinds (known to be
// wrong on GB10 with hwloc < 2.13+PR770), the Arm MIDR part number, sysfs cpu_capacity, and
// the maximum frequency.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spark/topo/machine.hpp"

namespace spark::topo {

/// What is known about one cpu; 0 means "not known".
struct CpuEvidence {
  int cpu = 0;
  unsigned midr_part = 0;  ///< Arm MIDR part number (/proc/cpuinfo "CPU part"), 0x0 unknown
  unsigned capacity = 0;   ///< sysfs cpu_capacity (1024 = the most capable core)
  unsigned max_mhz = 0;    ///< cpufreq cpuinfo_max_freq / hwloc FrequencyMaxMHz
};

/// One hwloc cpukind, least powerful first (hwloc's order).
struct HwlocKind {
  std::vector<int> cpus;
  int efficiency = -1;    ///< hwloc's efficiency rank, -1 unknown
  std::string core_type;  ///< CoreType info (Intel hybrid), may be ""
};

struct KindResult {
  std::vector<CoreKind> kinds;  ///< best first
  std::map<int, int> kind_of;   ///< cpu -> index into kinds
  KindDecision decision;
};

/// Name and performance tier of an Arm core from its MIDR part number (implementer 0x41);
/// tier 0 when unknown. Higher tier = faster core.
struct ArmPart {
  std::string_view name;
  int tier = 0;
};
ArmPart arm_part(unsigned part);

/// Decides the kinds: hwloc cpukinds are trusted only when MIDR (first) or cpu_capacity agree
/// with them; otherwise the cross-check source wins. `uniform_name` names a single kind.
KindResult decide_kinds(const std::vector<CpuEvidence>& cpus, const std::vector<HwlocKind>& hwloc,
                        const std::string& uniform_name);

/// Per-cpu MIDR part, cpu_capacity and max frequency of the live machine, read from
/// `root`/proc/cpuinfo and `root`/sys/devices/system/cpu/cpuN/. Missing files are not errors.
struct CpuProbe {
  std::map<int, unsigned> midr_part, capacity, max_mhz;
};
CpuProbe read_cpu_probe(const std::filesystem::path& root);

}  // namespace spark::topo
