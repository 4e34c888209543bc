// The environment each rank starts with: sparkrun's own environment, then -x variables,
// then the PMIx client variables, then launch-detection glue (Open MPI), then the SPARK_*
// identity variables (later layers win).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spark::launch {

using EnvVar = std::pair<std::string, std::string>;

struct RankIdentity {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int node_rank = 0;  // index of the rank's node in the job
  std::string job_id;
  std::string host;     // node name from the host list (not gethostname())
  std::string cpuset;   // "15-19" when bound, else empty (no SPARK_CPUSET)
  std::string lanes;    // "rocep1s0f0,..." when chosen, else empty (no SPARK_LANES)
  std::string job_dir;  // the node's job dir (SPARK_JOB_DIR), empty: none
};

/// Parses one -x argument. "VAR" takes VAR's value from `environment` ("NAME=value"
/// entries; throws UsageError when unset), "VAR=value" sets it. Names must be
/// [A-Za-z_][A-Za-z0-9_]*.
EnvVar resolve_export(std::string_view arg, const std::vector<std::string>& environment);

/// The SPARK_* identity variables for one rank.
std::vector<EnvVar> identity_env(const RankIdentity& id);

/// `vars` without the names the user set, in `base` ("NAME=value", sparkrun's environment) or
/// in `exports` (-x): the user's value wins.
std::vector<EnvVar> unless_set(std::vector<EnvVar> vars, const std::vector<std::string>& base,
                               const std::vector<EnvVar>& exports);

/// torchrun's per-rank variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK),
/// so that torch.distributed.init_process_group() works under sparkrun as under torchrun.
/// A name the user set, in `base` ("NAME=value", sparkrun's environment) or in `exports` (-x),
/// is left out: the user's value wins.
std::vector<EnvVar> torchrun_env(const RankIdentity& id, const std::vector<std::string>& base,
                                 const std::vector<EnvVar>& exports);

/// The attempt's variables (--max-restarts, docs/launcher.md): SPARK_RESTART_COUNT (0 on the
/// first attempt; always sparkrun's) and torchrun's TORCHELASTIC_RESTART_COUNT /
/// TORCHELASTIC_MAX_RESTARTS, those two only when the user set neither in `base` nor `exports`.
std::vector<EnvVar> restart_env(int restart_count, int max_restarts,
                                const std::vector<std::string>& base,
                                const std::vector<EnvVar>& exports);

/// torchrun's job-wide MASTER_ADDR / MASTER_PORT: `addr` (rank 0's host on the control
/// network) and `port`, and USE_LIBUV=0 (torch's store without libuv, docs/python.md), each
/// only when the user set it neither in `base` nor in `exports`.
std::vector<EnvVar> torchrun_master_env(const std::string& addr, int port,
                                        const std::vector<std::string>& base,
                                        const std::vector<EnvVar>& exports);

/// A TCP port that is free on this machine now (bound and released: the usual race with other
/// programs picking ports, as with torchrun's own choice). Throws std::system_error.
int pick_free_port();

/// Builds "NAME=value" strings: `base` ("NAME=value" entries) overlaid, in order, by each
/// layer. A later layer replaces an earlier value; the order of first appearance is kept.
std::vector<std::string> build_env(const std::vector<std::string>& base,
                                   const std::vector<std::vector<EnvVar>>& layers);

}  // namespace spark::launch
