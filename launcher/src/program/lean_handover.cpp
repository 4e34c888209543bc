#include "lean_handover.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#ifdef SPARKRUN_LEAN
#include "daemon.hpp"
#include "doctor.hpp"
#include "print_config.hpp"
#include "remote_launch.hpp"
#endif

namespace spark::launch {

#ifdef SPARKRUN_LEAN
namespace {

std::string full_program() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/sparkrun-full";
}

[[noreturn]] void exec_full(std::vector<std::string> args) {
  const std::string path = full_program();
  if (args.empty()) args.emplace_back("sparkrun");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  // Same pid, argv and environment; the signal mask and SIGPIPE's disposition carry over,
  // so a signal that arrives meanwhile stays pending for the full program's signalfd.
  ::execv(path.c_str(), argv.data());
  std::fprintf(stderr,
               "sparkrun: error: this command line needs the complete sparkrun, %s: %s (it is "
               "built and installed next to sparkrun)\n",
               path.c_str(), std::strerror(errno));
  std::fflush(stderr);
  ::_exit(1);
}

}  // namespace

void hand_over_if_needed(const Options& o) {
  // Inside a SLURM allocation the hosts come from the environment (docs/slurm.md).
  if (!o.hosts.empty() || !o.hostfile.empty() || !o.launch_agent.empty() ||
      !o.control_net.empty() || std::getenv("SLURM_JOB_ID") != nullptr ||
      std::getenv("SLURM_JOBID") != nullptr)
    hand_over_to_full();
}

void hand_over_to_full() {
  // This process's argv as it started (NUL-separated).
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t pos = 0; pos < all.size();) {
    const size_t end = all.find('\0', pos);
    args.push_back(all.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  exec_full(std::move(args));
}

// Stand-ins for the parts the lean build leaves out: each hands the command line over.
int daemon_main(int, char**) {
  hand_over_to_full();
}
int run_multihost(const MultiHostSpec&) {
  hand_over_to_full();
}
int print_config(const std::vector<std::string>&) {  // the knob table, libfmt: in sparkrun-full
  hand_over_to_full();
}
int doctor_main(int, char**) {
  hand_over_to_full();
}

#else  // sparkrun-full: the complete program

void hand_over_if_needed(const Options&) {}
void hand_over_to_full() {
  std::fprintf(stderr, "sparkrun: internal error: hand-over requested in sparkrun-full\n");
  std::_Exit(1);
}

#endif

}  // namespace spark::launch
