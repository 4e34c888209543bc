#include "fabric_command.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <csignal>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "options.hpp"
#include "tool_program.hpp"
#include "usage_error.hpp"

namespace spark::launch {

namespace {

constexpr const char* kFabricUsage =
    "usage: sparkrun fabric [--write FILE] [--fabric FILE] LAUNCH-OPTIONS\n"
    "  Discovers which lane of each host reaches which peer (one rank per host) and prints\n"
    "  the map: direct lanes per peer, or the neighbour that relays.\n"
    "  --write FILE   also write the map as JSON, to pin it later with --fabric FILE\n"
    "  --fabric FILE  compare with a pinned map; exit 1 showing both maps on a mismatch\n"
    "  LAUNCH-OPTIONS as for a job, e.g. -n 3 --host a,b,c [--launch-agent ...]\n"
    "                 [-x SPARK_DATA_NET=10.1.0.0/16] (keeps control interfaces out)\n"
    "  SPARK_FABRIC_DISCOVER overrides the path of the discovery program.\n";

}  // namespace

int fabric_main(int argc, char** argv) {
  CLI::App app{"sparkrun fabric", "sparkrun fabric"};
  app.set_help_flag();  // kFabricUsage is the help
  bool help = false;
  std::string write_file, pinned_file;
  app.add_flag("-h,--help", help);
  app.add_option("--write", write_file);
  app.add_option("--fabric", pinned_file);
  LaunchOptions launch(app, /*pinned_fabric=*/false);
  std::vector<std::string> given;
  try {
    if (parse_command_line(app, std::vector<std::string>(argv + 1, argv + argc))) {
      throw UsageError("'--': give launch options only, no program");
    }
    if (help) {
      std::cout << kFabricUsage;
      return 0;
    }
    if (app.count("--write") > 0 && write_file.empty())
      throw UsageError("--write: empty file name");
    if (app.count("--fabric") > 0 && pinned_file.empty()) {
      throw UsageError("--fabric: empty file name");
    }
    launch.finish();  // refuse bad launch options here, before anything starts
    given = launch.given();
    if (given.empty()) throw UsageError("give the hosts (e.g. -n 3 --host a,b,c)");
  } catch (const UsageError& e) {
    return report_usage_error(e.what(), "sparkrun fabric");
  }
  auto program =
      tool_program("SPARK_FABRIC_DISCOVER", SPARK_FABRIC_DISCOVER_PATH, "spark_fabric_discover");
  if (::access(program.c_str(), X_OK) != 0) {
    std::cerr << "sparkrun: error: discovery program " << program
              << " not found; build target spark_fabric_discover or set SPARK_FABRIC_DISCOVER\n";
    return 127;
  }
  std::vector<std::string> args{"sparkrun"};
  args.insert(args.end(), given.begin(), given.end());
  args.push_back(program);
  if (!write_file.empty()) args.insert(args.end(), {"--write", write_file});
  if (!pinned_file.empty()) args.insert(args.end(), {"--fabric", pinned_file});
  std::vector<char*> cargs;
  for (auto& s : args) cargs.push_back(s.data());
  cargs.push_back(nullptr);
  ::execv("/proc/self/exe", cargs.data());
  std::cerr << "sparkrun: error: cannot re-run sparkrun: " << std::strerror(errno) << "\n";
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
