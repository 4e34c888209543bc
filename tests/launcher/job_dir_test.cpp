#include "job_dir.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace spark::launch {
namespace {

namespace fs = std::filesystem;

pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status;
  ::waitpid(pid, &status, 0);
  return pid;  // reaped: no such process now
}

TEST(JobDir, NamedForItsOwnerAndRemovedAtTheEnd) {
  const fs::path base = fs::temp_directory_path() / ("job_dir_test." + std::to_string(::getpid()));
  fs::create_directories(base);
  ::setenv("TMPDIR", base.c_str(), 1);
  std::string path;
  {
    JobDir dir;
    path = dir.path();
    EXPECT_EQ(fs::path(path).parent_path(), base);
    EXPECT_EQ(
        fs::path(path).filename().string().rfind("sparkrun." + std::to_string(::getpid()) + ".", 0),
        0u)
        << path;
    std::ofstream(fs::path(path) / "session") << "x";
  }
  EXPECT_FALSE(fs::exists(path));
  ::unsetenv("TMPDIR");
  fs::remove_all(base);
}

// What a SIGKILL of sparkrun and its watcher together leaves is swept by the next job.
TEST(JobDir, StaleDirsOfDeadOwnersAreSwept) {
  const fs::path base = fs::temp_directory_path() / ("job_dir_sweep." + std::to_string(::getpid()));
  fs::create_directories(base);
  const fs::path stale = base / ("sparkrun." + std::to_string(dead_pid()) + ".AbCdEf");
  const fs::path live = base / ("sparkrun." + std::to_string(::getpid()) + ".GhIjKl");
  const fs::path other = base / "sparkrun.notapid.x";
  for (const auto& d : {stale, live, other}) fs::create_directories(d / "sub");
  EXPECT_EQ(remove_stale_job_dirs(base), 1);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  ::setenv("TMPDIR", base.c_str(), 1);
  fs::create_directories(stale);
  { JobDir next; }  // a new job sweeps first
  EXPECT_FALSE(fs::exists(stale));
  ::unsetenv("TMPDIR");
  fs::remove_all(base);
}

}  // namespace
}  // namespace spark::launch
