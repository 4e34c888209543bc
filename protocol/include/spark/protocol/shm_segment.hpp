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

}  // namespace spark::protocol::shm_segment
