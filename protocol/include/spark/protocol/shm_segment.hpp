// The names of the shm transport's segments in /dev/shm:
//   spark-<job id>-<node id>-r<rank>-<pid>-<random>   (each part sanitised to [A-Za-z0-9-_])
// One rule for the transport that creates them and for sparkrun, which removes what a job's
// ranks left behind (a rank killed between creating its segment and unlinking it once every
// peer attached; docs/reliability.md). In protocol/, which both include.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace spark::protocol::shm_segment {

/// Letters, digits and '-' kept, anything else '_', at most 40 characters.
inline std::string sanitize(std::string_view s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-') ? c : '_';
  if (out.size() > 40) out.resize(40);
  return out;
}

/// The file name prefix (in /dev/shm, no leading '/') shared by every segment of `job_id`.
inline std::string job_prefix(std::string_view job_id) {
  return "spark-" + sanitize(job_id) + "-";
}

/// The shm_open name of one rank's segment.
inline std::string name(std::string_view job_id, std::string_view node_id, int rank, long pid,
                        unsigned random) {
  return "/" + job_prefix(job_id) + sanitize(node_id) + "-r" + std::to_string(rank) + "-" +
         std::to_string(pid) + "-" + std::to_string(random & 0xffff);
}

/// The rank whose segment `file` (a /dev/shm entry, no leading '/') of job `job_id` is: a
/// transport segment (name(): "...-r<rank>-<pid>-<random>", read from the right, as a node id
/// may hold '-') or a flight recorder ("flight-r<rank>", protocol/flight_recorder.hpp); -1 for
/// anything else. Several hosts of a job can share one /dev/shm (network namespaces on one
/// machine): a node daemon removes only its own ranks' leftovers.
inline int rank_of(std::string_view file, std::string_view job_id) {
  const std::string prefix = job_prefix(job_id);
  if (file.substr(0, prefix.size()) != prefix) return -1;
  file.remove_prefix(prefix.size());
  auto number = [](std::string_view digits) -> long {
    if (digits.empty() || digits.size() > 9) return -1;
    long n = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return -1;
      n = n * 10 + (c - '0');
    }
    return n;
  };
  if (file.substr(0, 8) == "flight-r") return static_cast<int>(number(file.substr(8)));
  // From the right: <random>, <pid>, r<rank>.
  std::string_view parts[3];
  for (auto& part : parts) {
    const auto dash = file.rfind('-');
    if (dash == std::string_view::npos) return -1;
    part = file.substr(dash + 1);
    file = file.substr(0, dash);
  }
  if (number(parts[0]) < 0 || number(parts[1]) < 0 || parts[2].substr(0, 1) != "r") return -1;
  return static_cast<int>(number(parts[2].substr(1)));
}

}  // namespace spark::protocol::shm_segment
