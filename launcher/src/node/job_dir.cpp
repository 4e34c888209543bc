#include "job_dir.hpp"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "spark/protocol/number.hpp"

namespace spark::launch {
namespace {

constexpr std::string_view kPrefix = "sparkrun.";

}  // namespace

// Why not /tmp first: on a disk file system the directory's creation and removal are journal
// operations (~0.2 ms on an idle machine, and they can wait for the journal when other
// processes write), for a directory that, for most jobs, stays empty.
std::vector<std::string> job_dir_bases() {
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir != nullptr && *tmpdir != 0) return {tmpdir};
  std::vector<std::string> out;
  if (::access("/dev/shm", W_OK | X_OK) == 0) out.emplace_back("/dev/shm");
  out.emplace_back("/tmp");
  return out;
}

std::string report_dir(const std::string& given, const std::string& job_id) {
  if (!given.empty()) return given;
  std::error_code ec;
  const char* parent = std::getenv("SPARK_REPORT_DIR");
  const std::filesystem::path base =
      parent && *parent ? std::filesystem::absolute(parent, ec) : std::filesystem::current_path(ec);
  return (base / ("report." + job_id)).string();
}

pid_t job_dir_owner(std::string_view name) {
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  name.remove_prefix(kPrefix.size());
  const size_t dot = name.find('.');
  std::int64_t pid = 0;
  if (dot == std::string_view::npos ||
      protocol::parse_integer(name.substr(0, dot), 1, INT32_MAX, pid) != protocol::Integer::ok) {
    return 0;
  }
  return static_cast<pid_t>(pid);
}

int remove_stale_job_dirs(const std::string& base) {
  DIR* dir = ::opendir(base.c_str());
  if (dir == nullptr) return 0;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(dir)) {
    const pid_t owner = job_dir_owner(e->d_name);
    if (owner == 0 || ::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours
    struct stat st;
    const std::string path = base + "/" + e->d_name;
    if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) {
      stale.push_back(path);
    }
  }
  ::closedir(dir);
  int removed = 0;
  for (const auto& path : stale) {
    std::error_code ec;
    if (std::filesystem::remove_all(path, ec) > 0) ++removed;
  }
  return removed;
}

JobDir::JobDir() {
  const auto candidates = job_dir_bases();
  for (const auto& base : candidates) {
    remove_stale_job_dirs(base);
    std::string tmpl = base + "/" + std::string(kPrefix) + std::to_string(::getpid()) + ".XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) {
      path_ = tmpl;
      return;
    }
    if (&base == &candidates.back()) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    }
  }
}

JobDir::~JobDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace spark::launch
