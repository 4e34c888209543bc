#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "spark/topo/cpulist.hpp"
#include "spark/topo/kinds.hpp"

namespace spark::topo {

ArmPart arm_part(unsigned part) {
  // Implementer 0x41 (Arm) part numbers; tiers only order cores of one generation's big.LITTLE
  // families against each other.
  switch (part) {
    case 0xd85:
      return {"Cortex-X925", 30};
    case 0xd87:
      return {"Cortex-A725", 20};
    case 0xd80:
      return {"Cortex-A520", 10};
    case 0xd81:
      return {"Cortex-A720", 20};
    case 0xd82:
      return {"Cortex-X4", 30};
    case 0xd46:
      return {"Cortex-A510", 10};
    case 0xd47:
      return {"Cortex-A710", 20};
    case 0xd48:
      return {"Cortex-X2", 30};
    case 0xd4d:
      return {"Cortex-A715", 20};
    case 0xd4e:
      return {"Cortex-X3", 30};
    case 0xd4f:
      return {"Neoverse-V2", 30};
    case 0xd40:
      return {"Neoverse-V1", 30};
    case 0xd0c:
      return {"Neoverse-N1", 20};
    case 0xd49:
      return {"Neoverse-N2", 20};
    default:
      return {"", 0};
  }
}

namespace {

// An ordering of cpus into classes: key per cpu (higher = faster) and a name per key.
struct Partition {
  std::string source;
  std::map<int, long> key;  // cpu -> class key
  std::map<long, std::string> name;

  // Classes as cpu lists, slowest first.
  std::vector<std::vector<int>> groups() const {
    std::map<long, std::vector<int>> by_key;
    for (auto [cpu, k] : key) by_key[k].push_back(cpu);
    std::vector<std::vector<int>> out;
    for (auto& [k, cpus] : by_key) out.push_back(cpus);
    return out;
  }
};

bool agree(const Partition& a, const Partition& b) {
  return a.groups() == b.groups();
}

std::optional<Partition> from_midr(const std::vector<CpuEvidence>& cpus, std::string& note) {
  Partition p{"MIDR part number", {}, {}};
  std::set<unsigned> parts;
  for (const auto& c : cpus) {
    if (c.midr_part == 0) return std::nullopt;
    parts.insert(c.midr_part);
  }
  if (cpus.empty()) return std::nullopt;
  std::map<int, unsigned> tier_part;
  for (unsigned part : parts) {
    ArmPart info = arm_part(part);
    if (parts.size() > 1 && info.tier == 0) {
      note = "MIDR part numbers differ but part 0x" + [&] {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%x", part);
        return std::string(buf);
      }() + " is unknown to sparkrun, so they cannot be ranked";
      return std::nullopt;
    }
    if (parts.size() > 1 && tier_part.count(info.tier) != 0) {
      note = "MIDR part numbers differ but two parts have the same rank";
      return std::nullopt;
    }
    tier_part[info.tier] = part;
  }
  for (const auto& c : cpus) {
    ArmPart info = arm_part(c.midr_part);
    long k = parts.size() > 1 ? info.tier : 0;
    p.key[c.cpu] = k;
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", c.midr_part);
    p.name[k] = info.name.empty() ? "part " + std::string(buf) : std::string(info.name);
  }
  return p;
}

// Groups values that lie within 10% of each other (kernel capacities of one core type vary
// by a few percent: 997-1024 vs 718-731 on GB10).
std::optional<Partition> from_values(const std::vector<CpuEvidence>& cpus,
                                     unsigned CpuEvidence::*field, const std::string& source) {
  if (cpus.empty()) return std::nullopt;
  std::vector<unsigned> values;
  for (const auto& c : cpus) {
    if (c.*field == 0) return std::nullopt;
    values.push_back(c.*field);
  }
  std::sort(values.begin(), values.end());
  std::map<unsigned, long> group_of;
  long group = 0;
  unsigned group_low = values.front();
  for (unsigned v : values) {
    if (static_cast<double>(v) > group_low * 1.10) {
      ++group;
      group_low = v;
    }
    group_of[v] = group;
  }
  Partition p{source, {}, {}};
  for (const auto& c : cpus) p.key[c.cpu] = group_of[c.*field];
  return p;
}

std::optional<Partition> from_hwloc(const std::vector<CpuEvidence>& cpus,
                                    const std::vector<HwlocKind>& kinds) {
  if (kinds.empty()) return std::nullopt;
  Partition p{"hwloc cpukinds", {}, {}};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    long k = kinds[i].efficiency >= 0 ? kinds[i].efficiency : static_cast<long>(i);
    for (int cpu : kinds[i].cpus) p.key[cpu] = k;
    if (!kinds[i].core_type.empty()) p.name[k] = kinds[i].core_type;
  }
  // Only the cpus we rank count; a cpu hwloc left out of every kind makes the kinds unusable.
  Partition restricted = p;
  restricted.key.clear();
  for (const auto& c : cpus) {
    auto it = p.key.find(c.cpu);
    if (it == p.key.end()) return std::nullopt;
    restricted.key[c.cpu] = it->second;
  }
  return restricted;
}

// The fastest class's cpus as text, for messages.
std::string fastest(const Partition& p) {
  auto groups = p.groups();
  return groups.empty() ? std::string() : format_cpu_list(groups.back());
}

}  // namespace

KindResult decide_kinds(const std::vector<CpuEvidence>& cpus, const std::vector<HwlocKind>& hwloc,
                        const std::string& uniform_name) {
  KindResult result;
  std::string midr_note;
  auto midr = from_midr(cpus, midr_note);
  auto capacity = from_values(cpus, &CpuEvidence::capacity, "sysfs cpu_capacity");
  auto frequency = from_values(cpus, &CpuEvidence::max_mhz, "max frequency");
  auto hw = from_hwloc(cpus, hwloc);

  std::vector<std::string> notes;
  if (!midr_note.empty()) notes.push_back(midr_note);
  std::optional<Partition> cross = midr ? midr : capacity;
  if (midr && capacity && !agree(*midr, *capacity)) {
    notes.push_back("sysfs cpu_capacity disagrees with the MIDR part numbers; MIDR wins");
  }

  const Partition* chosen = nullptr;
  KindDecision& d = result.decision;
  if (hw) {
    if (cross && agree(*hw, *cross)) {
      chosen = &*hw;
      d.source = "hwloc cpukinds";
      d.detail = "confirmed by " + cross->source;
      d.cpukinds_trusted = true;
    } else if (cross) {
      chosen = &*cross;
      d.source = cross->source;
      d.detail = "hwloc cpukinds disagree (they rank cpus " + fastest(*hw) +
                 " fastest) and were overruled";
    } else {
      chosen = &*hw;
      d.source = "hwloc cpukinds";
      d.detail = "not cross-checked: no MIDR part number or cpu_capacity available";
      d.cpukinds_trusted = true;
    }
  } else if (cross) {
    chosen = &*cross;
    d.source = cross->source;
    d.detail = "hwloc reported no cpukinds";
  } else if (frequency && frequency->groups().size() > 1) {
    chosen = &*frequency;
    d.source = "max frequency";
    d.detail = "no cpukinds, MIDR part number or cpu_capacity available";
  } else {
    d.source = "uniform";
    d.detail = "no cpukinds, MIDR part number or cpu_capacity differences";
  }
  for (const auto& n : notes) d.detail += "; " + n;

  // Build kinds, best first.
  std::vector<std::vector<int>> groups;
  std::vector<std::string> names;
  if (chosen != nullptr) {
    std::map<long, std::vector<int>> by_key;
    for (auto [cpu, k] : chosen->key) by_key[k].push_back(cpu);
    for (auto it = by_key.rbegin(); it != by_key.rend(); ++it) {
      groups.push_back(it->second);
      auto name = chosen->name.find(it->first);
      names.push_back(name != chosen->name.end() ? name->second : std::string());
    }
  } else {
    std::vector<int> all;
    for (const auto& c : cpus) all.push_back(c.cpu);
    groups.push_back(all);
    names.push_back(uniform_name);
  }
  // Name kinds by their Arm core when MIDR knows it, else by the chosen source, else kindN.
  std::map<int, unsigned> part_of, mhz_of;
  for (const auto& c : cpus) {
    part_of[c.cpu] = c.midr_part;
    mhz_of[c.cpu] = c.max_mhz;
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    CoreKind kind;
    kind.cpus = groups[i];
    std::set<unsigned> parts;
    for (int cpu : kind.cpus) {
      parts.insert(part_of[cpu]);
      kind.max_mhz = std::max(kind.max_mhz, mhz_of[cpu]);
    }
    if (parts.size() == 1 && !arm_part(*parts.begin()).name.empty()) {
      kind.name = std::string(arm_part(*parts.begin()).name);
    } else if (!names[i].empty()) {
      kind.name = names[i];
    } else {
      kind.name = groups.size() == 1 ? uniform_name : "kind" + std::to_string(i);
    }
    for (int cpu : kind.cpus) result.kind_of[cpu] = static_cast<int>(i);
    result.kinds.push_back(std::move(kind));
  }
  return result;
}

}  // namespace spark::topo
