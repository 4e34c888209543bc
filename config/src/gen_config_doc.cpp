// Writes docs/configuration.md from the knob table, or checks that the file is current.
//   spark_config_doc                  print to stdout
//   spark_config_doc --output FILE    (re)write FILE
//   spark_config_doc --check FILE     exit 1 when FILE differs from what would be generated
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "spark/config/config.hpp"

namespace {

using spark::config::Knob;
using spark::config::KnobOrigin;
using spark::config::KnobScope;
using spark::config::KnobType;

// A '|' inside a cell would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string valid_values(const Knob& k) {
  switch (k.kind) {
    case KnobType::integer:
    case KnobType::milliseconds:
      return fmt::format("{}..{}", k.min, k.max);
    case KnobType::choice:
      return std::string(k.choices);
    case KnobType::host_port:
      return "HOST:PORT, PORT 1..65535";
    case KnobType::port_range:
      return "FIRST-LAST or PORT, 1..65535";
    case KnobType::refused:
      return "must not be set";
    case KnobType::string:
      if (k.name == "SPARK_TCP_ADDR") return "dotted IPv4";
      if (k.name == "SPARK_LOG") return "error|warn|info|trace, optional :subsys,...";
      return "non-empty";
    case KnobType::path:
      return "non-empty";
    case KnobType::unchecked:
      return "not checked by sparkrun";
  }
  return "";
}

std::string section(KnobOrigin origin) {
  switch (origin) {
    case KnobOrigin::user:
      return "Tuning and diagnostics";
    case KnobOrigin::launcher:
      return "Set by sparkrun for every rank";
    case KnobOrigin::tool:
      return "Programs sparkrun starts";
    case KnobOrigin::scripts:
      return "Build and test scripts";
    case KnobOrigin::torchrun:
      return "torchrun compatibility";
    case KnobOrigin::removed:
      return "Removed (refused when set)";
  }
  return "";
}

std::string generate() {
  std::ostringstream out;
  out << "# Configuration: environment variables\n\n"
         "<!-- GENERATED from config/src/knobs.cpp by spark_config_doc; do not edit.\n"
         "     Regenerate: cmake --build BUILD --target spark_config_doc_update -->\n\n"
         "libspark reads these variables once, when a communicator starts, into an immutable\n"
         "snapshot. Every value is parsed strictly: an empty value, trailing garbage, a negative\n"
         "or out-of-range number is refused at start-up with a message naming the variable, the\n"
         "value and the valid range (an empty variable never means 0: unset it to get the\n"
         "default). `sparkrun --print-config` prints the effective values and where each came\n"
         "from (`-x NAME=VALUE` given with it counts, as it would for the ranks).\n\n"
         "Every `SPARK_*` / `SPARKNET_*` name is in the tables below. One that is not (in\n"
         "sparkrun's environment or given with `-x`) is most likely a typo: sparkrun prints one\n"
         "line per name on stderr before the job starts (and --print-config does too), naming\n"
         "the nearest known name when one is close (edit distance, `SPARK_` and `SPARKNET_`\n"
         "interchangeable), and the job runs with the defaults:\n\n"
         "    sparkrun: warning: SPARK_TRASNPORT is not a sparkrun setting (did you mean "
         "SPARK_TRANSPORT?)\n\n"
         "Apache Spark's variables are another program's and are not warned about:";
  const char* separator = " ";
  for (std::string_view name : spark::config::other_programs_names()) {
    out << separator << '`' << name << (name.ends_with('_') ? "*" : "") << '`';
    separator = ", ";
  }
  out << ".\n";
  out << R"(
## How ranks find each other

`spark::init()` (and `spark_init()`) picks the bootstrap once, in this order; `SPARK_BOOTSTRAP`
forces one:

1. **PMIx** when a PMIx server started the process (`PMIX_RANK` or `PMIX_NAMESPACE` is set):
   sparkrun, `srun --mpi=pmix`, `mpirun`. Endpoints go through PMIx_Put/Commit, a collecting
   PMIx_Fence and PMIx_Get; rank, size, local rank/size and node come from the server.
2. **Environment rendezvous** when `SPARK_RANK`/`SPARK_SIZE` (or torchrun's `RANK`/`WORLD_SIZE`)
   are set. Rank 0 listens on the port of `SPARK_RENDEZVOUS=HOST:PORT` (else
   `MASTER_ADDR:MASTER_PORT`) on every interface and serves a small key-value store; every
   rank connects to it (retrying while rank 0 is not up yet) within `SPARK_JOIN_TIMEOUT_MS`.
   Ranks exchange their node id (`SPARK_HOST`, else the hostname), from which local rank, local
   size and node index follow. A fence that cannot complete fails on every waiting rank with
   the same message naming the missing ranks (`ranks 1, 3 did not reach fence 1 within
   60000 ms; never connected: 3`), or at once when a rank exits (`fence 2 cannot complete:
   rank 2 left the rendezvous before reaching it (exited or crashed)`). Rank 0 keeps serving
   after it is done until no rank still waits for an answer. Do not reuse torch's
   `MASTER_PORT` when the same program also starts torch.distributed: both would listen there.
3. **Singleton**: one rank, no network.

## On a failure

With `SPARK_ON_FAILURE=abort` (default) a rank whose communicator fails reports the one-line
record and ends the group: under PMIx with PMIx_Abort (sparkrun stops every rank and prints
the line; under other PMIx servers such as srun the rank also prints it on its stderr), under the environment rendezvous by telling rank 0's store and exiting with
status 1 (its peers see its connections close and fail at once, each with its own record).
`SPARK_ON_FAILURE=raise` only fails the communicator: every call then throws
`spark::CommFailure` (C API: returns `SPARK_ERR_COMM_FAILED`, `spark_failure()` gives the
record), and the application must exit itself.
)";
  std::string shared;
  for (const Knob& k : spark::config::knobs())
    if (k.scope == KnobScope::job)
      shared += (shared.empty() ? "`" : ", `") + std::string(k.name) + "`";
  out << fmt::format(R"(
## Settings every rank must share

Some settings decide what both ends of a connection expect, so every rank of a job must have
the same value: {} (the column "Same on every rank" below), and the same libspark version.
Each rank publishes these values with its first bootstrap publish; right after that fence
every rank compares every rank's values, so a difference fails the job at once, on every rank,
before anything waits on a peer. Under sparkrun the one line reads

    sparkrun: rank 0 aborted: settings differ between ranks: SPARK_TCP_LANES=4 on rank 1, 2 on ranks 0,2 (give every rank the same value, e.g. with -x SPARK_TCP_LANES=4)

(rank 0 reports it; the others are stopped with it or, not under a launcher, throw the same
`spark::ConfigError` within 5 s). With `SPARK_ON_FAILURE=raise` every rank throws it from
`spark::init()`. Sub-communicators inherit their parent's settings.
)",
                     shared);
  for (auto origin : {KnobOrigin::user, KnobOrigin::launcher, KnobOrigin::tool, KnobOrigin::scripts,
                      KnobOrigin::torchrun, KnobOrigin::removed}) {
    out << "\n## " << section(origin) << "\n\n"
        << "| Variable | Type | Default | Valid | Same on every rank | Description |\n"
        << "| --- | --- | --- | --- | --- | --- |\n";
    for (const Knob& k : spark::config::knobs()) {
      if (k.origin != origin) continue;
      out << fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", k.name, cell(k.type),
                         k.default_value.empty() ? "unset" : fmt::format("`{}`", k.default_value),
                         cell(valid_values(k)), k.scope == KnobScope::job ? "yes" : "",
                         cell(k.doc));
    }
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string text = generate();
  if (argc == 1) {
    std::cout << text;
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--output") {
    std::ofstream file(argv[2], std::ios::binary | std::ios::trunc);
    file << text;
    if (!file) {
      std::cerr << "spark_config_doc: cannot write " << argv[2] << "\n";
      return 1;
    }
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--check") {
    std::ifstream file(argv[2], std::ios::binary);
    std::ostringstream current;
    current << file.rdbuf();
    if (!file || current.str() != text) {
      std::cerr << "spark_config_doc: " << argv[2]
                << " is out of date with the knob table (config/src/knobs.cpp); "
                   "regenerate it: cmake --build BUILD --target spark_config_doc_update\n";
      return 1;
    }
    return 0;
  }
  std::cerr << "usage: spark_config_doc [--output FILE | --check FILE]\n";
  return 2;
}
