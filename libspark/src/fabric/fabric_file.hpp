// The pinned fabric file (`--fabric FILE`, docs/fabric.md): JSON naming hosts, their ports
// (lanes) and the cables between them. `sparkrun fabric --write FILE` produces it from a
// discovered map; at start-up the found map is compared with it and a mismatch is refused.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fabric/fabric_map.hpp"

namespace spark::fabric {

/// One cable end "host:lane"; a cable is an ordered pair (smaller end first).
using Cable = std::pair<std::string, std::string>;

struct FabricFile {
  std::vector<std::string> hosts;
  std::vector<std::vector<Lane>> lanes;  ///< per host, informational (addresses may change)
  std::set<Cable> cables;                ///< what is compared
};

/// Cables of a discovered map: one per direct lane pair, named by host and lane name.
FabricFile from_map(const std::vector<std::string>& hosts,
                    const std::vector<std::vector<Lane>>& lanes, const FabricMap& map);
std::string to_json(const FabricFile& file);
/// Strict: throws spark::ConfigError naming `origin` and what is wrong (unknown host in a
/// cable, missing keys, bad addresses, duplicate hosts).
FabricFile parse_fabric_json(const std::string& text, const std::string& origin);
FabricFile load_fabric_file(const std::string& path);
/// Empty when `found` matches `pinned` (same hosts, same cables); else a message that shows
/// both maps and what differs, one item per line.
std::string compare(const FabricFile& pinned, const FabricFile& found);

}  // namespace spark::fabric
