// A minimal PMIx client for the SLURM tests: checks that a PMIx server (SLURM's mpi/pmix
// plugin, or sparkrun's) gives it a rank, a job size and a working put/commit/fence/get,
// independent of libspark. Modes:
//   pmix_probe                 exchange and check; prints "pmix_probe: rank R of N: ok ..."
//   pmix_probe --abort-rank K  after the exchange rank K prints a fail-stop line on stderr
//                              and calls PMIx_Abort(1, line); the others wait in a fence
//                              that never completes: only the server's abort can end them
//   pmix_probe --exit-rank K   after the exchange rank K exits 3 without a word; the others
//                              wait in a fence (a dead rank: srun -K must end the step)
#include <pmix.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace {

int fail(const char* what, pmix_status_t rc) {
  std::fprintf(stderr, "pmix_probe: %s failed: %s\n", what, PMIx_Error_string(rc));
  return 2;
}

bool parse_rank(const char* text, int& out) {
  const std::string_view s(text);
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  int abort_rank = -1;
  int exit_rank = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    int* target = arg == "--abort-rank" ? &abort_rank : arg == "--exit-rank" ? &exit_rank : nullptr;
    if (target == nullptr || i + 1 >= argc || !parse_rank(argv[i + 1], *target)) {
      std::fprintf(stderr, "usage: pmix_probe [--abort-rank K | --exit-rank K]\n");
      return 2;
    }
    ++i;
  }

  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) return fail("PMIx_Init", rc);
  const int rank = static_cast<int>(me.rank);

  pmix_proc_t wildcard;
  PMIX_LOAD_PROCID(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* val = nullptr;
  rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, nullptr, 0, &val);
  if (rc != PMIX_SUCCESS) return fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
  const int size = static_cast<int>(val->data.uint32);
  PMIX_VALUE_RELEASE(val);

  // Every rank publishes rank+1; after the fence each reads all and checks the sum.
  pmix_value_t mine;
  PMIX_VALUE_CONSTRUCT(&mine);
  mine.type = PMIX_UINT32;
  mine.data.uint32 = static_cast<uint32_t>(rank + 1);
  if ((rc = PMIx_Put(PMIX_GLOBAL, "spark.probe", &mine)) != PMIX_SUCCESS)
    return fail("PMIx_Put", rc);
  if ((rc = PMIx_Commit()) != PMIX_SUCCESS) return fail("PMIx_Commit", rc);
  pmix_info_t collect;
  bool yes = true;
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  if ((rc = PMIx_Fence(&wildcard, 1, &collect, 1)) != PMIX_SUCCESS) return fail("PMIx_Fence", rc);

  long sum = 0;
  for (int r = 0; r < size; ++r) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, static_cast<pmix_rank_t>(r));
    if ((rc = PMIx_Get(&peer, "spark.probe", nullptr, 0, &val)) != PMIX_SUCCESS) {
      return fail("PMIx_Get(spark.probe)", rc);
    }
    sum += val->data.uint32;
    PMIX_VALUE_RELEASE(val);
  }
  const long expected = static_cast<long>(size) * (size + 1) / 2;
  std::printf("pmix_probe: rank %d of %d: %s sum %ld (expected %ld)\n", rank, size,
              sum == expected ? "ok" : "WRONG", sum, expected);
  std::fflush(stdout);
  if (sum != expected) return 1;

  if (rank == exit_rank) _exit(3);
  if (rank == abort_rank) {
    // The same shape as libspark's fail-stop report (INTERFACES.md).
    char line[200];
    std::snprintf(line, sizeof line,
                  "rank %d: allreduce seq 1 step 0: no data from rank %d on lane tcp:0 after 100 "
                  "ms (timeout 100 ms)",
                  rank, (rank + 1) % size);
    std::fprintf(stderr, "%s\n", line);
    std::fflush(stderr);
    PMIx_Abort(1, line, nullptr, 0);
    return 1;  // not reached when the server ends the job
  }
  if (abort_rank >= 0 || exit_rank >= 0) {
    // A fence that cannot complete: the failed rank never joins.
    rc = PMIx_Fence(&wildcard, 1, nullptr, 0);
    std::fprintf(stderr, "pmix_probe: rank %d: second fence returned %s\n", rank,
                 PMIx_Error_string(rc));
    PMIx_Finalize(nullptr, 0);
    return 1;
  }
  rc = PMIx_Finalize(nullptr, 0);
  return rc == PMIX_SUCCESS ? 0 : fail("PMIx_Finalize", rc);
}
