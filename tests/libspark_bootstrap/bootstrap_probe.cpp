// Runs the automatic bootstrap in a launched process and checks an exchange:
//   bootstrap_probe EXPECTED_KIND [EXPECTED_SIZE [abort]]
// Every rank publishes "probe-<rank>", fences, reads every other rank's value, prints one line
// and exits 0 only when everything matched. Used under mpirun (a real PMIx server) and sparkrun.
// With "abort", the last rank then calls Bootstrap::abort(3, <a failure line>) while the others
// wait in a fence: the launcher must end the job, print the line and exit 3.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "spark/config/config.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bootstrap_probe EXPECTED_KIND [EXPECTED_SIZE]\n");
    return 2;
  }
  try {
    using namespace spark::bootstrap;
    auto boot = make_bootstrap(spark::config::Config::from_environment());
    const int rank = boot->rank();
    const int size = boot->size();
    if (boot->kind() != argv[1]) {
      std::fprintf(stderr, "rank %d: bootstrap kind %s, expected %s\n", rank,
                   std::string(boot->kind()).c_str(), argv[1]);
      return 1;
    }
    if (argc > 2 && size != std::atoi(argv[2])) {
      std::fprintf(stderr, "rank %d: size %d, expected %s\n", rank, size, argv[2]);
      return 1;
    }
    boot->put("probe", as_bytes("probe-" + std::to_string(rank)));
    boot->commit();
    boot->fence(std::chrono::seconds(30));
    for (int r = 0; r < size; ++r) {
      const auto got = to_string(boot->get(r, "probe"));
      if (got != "probe-" + std::to_string(r)) {
        std::fprintf(stderr, "rank %d: rank %d published \"%s\"\n", rank, r, got.c_str());
        return 1;
      }
    }
    if (argc > 3 && std::string(argv[3]) == "abort" && rank == size - 1) {
      boot->abort(3, "rank " + std::to_string(rank) +
                         ": allreduce seq 42 step 1: no data from rank 0 on lane tcp:1 after "
                         "10000 ms (timeout 10000 ms)");
    }
    boot->fence(std::chrono::seconds(30));
    std::printf("probe: %s rank %d/%d local %d/%d node %d (%s): exchange ok\n",
                std::string(boot->kind()).c_str(), rank, size, boot->local_rank(),
                boot->local_size(), boot->node_rank(), boot->node_id().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe: %s\n", e.what());
    return 1;
  }
}
