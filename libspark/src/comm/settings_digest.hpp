// The settings every rank must share, compared at wire-up: each rank publishes its record (the
// library version and the knob rows of scope job, config/src/knobs.cpp) with its first bootstrap
// publish; after that fence every rank reads every record and reaches the same verdict, so a
// difference fails every rank at once with one line naming the setting, its values and the
// ranks, instead of a hang until a barrier timeout that blames an innocent rank.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spark/config/options.hpp"

namespace spark::settings_digest {

/// NAME -> value, in a fixed order ("" = unset).
using Settings = std::vector<std::pair<std::string, std::string>>;

/// The bootstrap key a rank's record is published under.
inline constexpr const char* kKey = "spark.settings";
/// The record's entry that carries the library version (first in every record).
inline constexpr const char* kVersion = "libspark version";

/// This rank's record: the library version, then options.job_settings.
Settings of(const CommOptions& options);

/// A record in the bootstrap's entry-list format (bootstrap/wire.hpp, fence_ok: u32 n,
/// n x (u32 rank, str name, bytes value)).
std::vector<std::byte> encode(int rank, const Settings& settings);
/// Throws spark::BootstrapError naming `rank` when the bytes are not such a record.
Settings decode(int rank, std::span<const std::byte> bytes);

/// nullopt when every rank has the same record; else the one line every rank reports, e.g.
/// "settings differ between ranks: SPARK_TCP_LANES=4 on rank 1, 2 on ranks 0,2 (give every
/// rank the same value, e.g. with -x SPARK_TCP_LANES=4)". `by_rank[r]` is rank r's record;
/// `nodes[r]` its node id (optional): when the ranks span nodes, each rank list names its hosts
/// ("SPARK_TCP_LANES=4 on rank 1 (host b), 2 on ranks 0,2 (hosts a,c)").
std::optional<std::string> verdict(std::span<const Settings> by_rank,
                                   std::span<const std::string> nodes = {});

}  // namespace spark::settings_digest
