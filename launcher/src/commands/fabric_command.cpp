#include "fabric_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace spark::launch {

namespace {

constexpr const char* kUsage =
    "usage: sparkrun fabric [--write FILE] [--fabric FILE] LAUNCH-OPTIONS\n"
    "  Discovers which lane of each host reaches which peer (one rank per host) and prints\n"
    "  the map: direct lanes per peer, or the neighbour that relays.\n"
    "  --write FILE   also write the map as JSON, to pin it later with --fabric FILE\n"
    "  --fabric FILE  compare with a pinned map; exit 1 showing both maps on a mismatch\n"
    "  LAUNCH-OPTIONS as for a job, e.g. -n 3 --host a,b,c [--launch-agent ...]\n"
    "                 [-x SPARK_DATA_NET=10.1.0.0/16] (keeps control interfaces out)\n"
    "  SPARK_FABRIC_DISCOVER overrides the path of the discovery program.\n";

// The discovery program: $SPARK_FABRIC_DISCOVER, the build tree's, or next to sparkrun.
std::string discover_program() {
  if (const char* p = std::getenv("SPARK_FABRIC_DISCOVER"); p && *p) return p;
#ifdef SPARK_FABRIC_DISCOVER_PATH
  if (std::filesystem::exists(SPARK_FABRIC_DISCOVER_PATH)) return SPARK_FABRIC_DISCOVER_PATH;
#endif
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "spark_fabric_discover").string();
}

}  // namespace

int fabric_main(int argc, char** argv) {
  std::vector<std::string> launch, tool;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--write" || a == "--fabric") {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        std::cerr << "sparkrun fabric: " << a << " needs a FILE\n" << kUsage;
        return 2;
      }
      tool.push_back(a);
      tool.push_back(argv[++i]);
    } else {
      launch.push_back(a);
    }
  }
  if (launch.empty()) {
    std::cerr << "sparkrun fabric: give the hosts (e.g. -n 3 --host a,b,c)\n" << kUsage;
    return 2;
  }
  auto program = discover_program();
  if (::access(program.c_str(), X_OK) != 0) {
    std::cerr << "sparkrun fabric: discovery program " << program
              << " not found; build target spark_fabric_discover or set SPARK_FABRIC_DISCOVER\n";
    return 127;
  }
  std::vector<std::string> args{"sparkrun"};
  args.insert(args.end(), launch.begin(), launch.end());
  args.push_back(program);
  args.insert(args.end(), tool.begin(), tool.end());
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  ::execv("/proc/self/exe", cargs.data());
  std::cerr << "sparkrun fabric: cannot re-run sparkrun: " << std::strerror(errno) << "\n";
  return 127;
}

int check_pinned_fabric(const std::vector<std::string>& args, std::size_t command_size,
                        const std::string& file) {
  std::vector<std::string> sub{"sparkrun", "fabric", "--fabric", file};
  const std::size_t launch_end = args.size() - std::min(command_size, args.size());
  for (std::size_t i = 0; i < launch_end; ++i) {
    if (args[i] == "--fabric") {
      ++i;  // and its FILE
      continue;
    }
    if (args[i].rfind("--fabric=", 0) == 0) continue;
    sub.push_back(args[i]);
  }
  std::vector<char*> cargs;
  for (auto& s : sub) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "sparkrun: cannot check the fabric map: fork: " << std::strerror(errno) << "\n";
    return 1;
  }
  if (pid == 0) {
    sigset_t none;  // sparkrun blocks its signals for a signalfd; the check must not inherit that
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv("/proc/self/exe", cargs.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  std::cerr << "sparkrun: refusing to start: the fabric map does not match " << file
            << " (or could not be discovered; see above)\n";
  return WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
}

}  // namespace spark::launch
