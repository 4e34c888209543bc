// The live machine's topology kept as hwloc XML between launches (LoadOptions::cache_file):
// parsing it takes ~0.1 ms where discovery from sysfs takes ~1 ms of every launch. A file is
// used only while the machine it describes is this one (machine_key()) and only when it is
// the caller's own and writable by no one else; anything else is discovery, as without it.
#pragma once

#include <hwloc.h>

#include <filesystem>
#include <optional>
#include <string>

namespace spark::topo::cache {

/// The cached XML (without its key line) when `file` holds one made under `key`.
std::optional<std::string> read(const std::filesystem::path& file, const std::string& key);

/// Saves `topo` under `key` (a temporary file renamed over `file`, mode 0600). Best effort:
/// a cache that cannot be written only costs the next launch a discovery.
void write(const std::filesystem::path& file, const std::string& key, hwloc_topology_t topo);

}  // namespace spark::topo::cache
