// RoCE v2 GID selection by value. The GID index of the IPv4 RoCE v2 address differs between
// nodes and can change at run time (pinning a number caused silent hangs on Sparks), so it is
// looked up at start-up from sysfs:
//   <root>/<device>/ports/<port>/gids/<i>               "0000:0000:0000:0000:0000:ffff:0a32:0001"
//   <root>/<device>/ports/<port>/gid_attrs/types/<i>    "RoCE v2"
// The root is a parameter so that tests can point at a fake tree.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spark::verbs {

inline constexpr std::string_view kSysfsInfiniband = "/sys/class/infiniband";

using Gid = std::array<std::uint8_t, 16>;

/// Parses sysfs' "xxxx:xxxx:...:xxxx" (8 groups of 4 hex digits); nullopt when malformed.
std::optional<Gid> parse_sysfs_gid(std::string_view text);
/// Standard IPv6 text, e.g. "::ffff:10.50.0.1".
std::string gid_text(const Gid& gid);
/// True for ::ffff:a.b.c.d.
bool is_ipv4_mapped(const Gid& gid) noexcept;
/// a.b.c.d of ::ffff:a.b.c.d, in host byte order.
std::uint32_t gid_ipv4(const Gid& gid) noexcept;
/// The first line of a sysfs file without trailing white space; nullopt when it cannot be read
/// (rxe answers EINVAL when the type or ndev of an unused GID entry is read).
std::optional<std::string> sysfs_line(const std::string& path);

struct GidChoice {
  int index = -1;
  Gid gid{};
  std::string source;  ///< "sysfs" or "SPARK_IB_GID_INDEX"
};

/// Strict parse of a SPARK_IB_GID_INDEX value: decimal 0..65535; "" / "abc" / "1x" throw
/// spark::ConfigError naming the variable and value.
int parse_gid_index(std::string_view value);

/// The GID to use on device/port: `index_override` (the raw SPARK_IB_GID_INDEX value, when
/// set) wins; otherwise the lowest-index IPv4-mapped GID of type "RoCE v2". Throws VerbsError
/// naming the device, port and what was found, with the fix.
GidChoice select_gid(std::string_view sysfs_root, std::string_view device, int port,
                     const std::optional<std::string>& index_override);

}  // namespace spark::verbs
