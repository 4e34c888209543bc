// The OpenPMIx server that a node runner hosts for its local ranks. PMIx calls our hooks
// on its own progress thread; the hooks here only queue work (see NodeRunner). The abort
// completion is awaited on PMIx's thread (bounded); fence completions of a multi-host job
// come from the control link's thread.
// PMIx is process-global: one PmixServer per process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rank_env.hpp"

namespace spark::launch {

struct PmixJob {
  std::string nspace;  // = SPARK_JOB_ID
  int size = 0;
  int universe_size = 0;
  std::vector<std::string> node_hosts;       // every node of the job, in node order
  std::vector<std::vector<int>> node_ranks;  // global ranks per node
  int this_node = 0;
  std::string tmpdir;                // job's top tmp dir (PMIX_TMPDIR)
  std::vector<std::string> cpusets;  // per local rank: PMIX_CPUSET "15-19" ("" = unbound)
};

struct FenceRequest {
  std::string data;                                    // this node's combined contributions
  std::function<void(std::string all_data)> complete;  // call once, from any thread
};

struct PmixHooks {
  std::function<void(int rank, int status, std::string message, std::function<void()> done)> abort;
  std::function<void(FenceRequest)> fence;
  std::function<void(int rank)> connected;
  std::function<void(int rank)> finalized;
};

/// True once a PmixServer::finalize gave up (or leave_to_exit was called): the process must
/// leave with _exit (exit() would run teardown code while PMIx's threads are still inside the
/// library).
bool finalize_abandoned();

class PmixServer {
 public:
  /// PMIx_server_init with its rendezvous files under `tmpdir`. `hwloc_topology` (an
  /// hwloc_topology_t, may be null) is handed to PMIx so that it skips its own discovery,
  /// which costs tens of milliseconds; it must outlive the server. Throws std::runtime_error.
  PmixServer(const std::string& tmpdir, PmixHooks hooks, void* hwloc_topology = nullptr);
  ~PmixServer();
  PmixServer(const PmixServer&) = delete;
  PmixServer& operator=(const PmixServer&) = delete;

  /// Registers the job (job-, node- and proc-level keys) and this node's ranks as clients
  /// running as uid/gid.
  void register_job(const PmixJob& job, uid_t uid, gid_t gid);
  /// The variables a registered local rank needs (PMIx_server_setup_fork).
  std::vector<EnvVar> client_env(int rank);

  const PmixHooks& hooks() const { return hooks_; }

  /// PMIx_server_finalize with a bound: returns false, leaving PMIx running, when it has not
  /// returned within `limit` or when SIGINT/SIGTERM/SIGHUP/SIGQUIT arrives on `signal_fd`
  /// (a signalfd, or -1). After false the object must be leaked and the process must end
  /// soon with _exit (see finalize_abandoned()). The destructor finalizes with a 5 s bound.
  bool finalize(std::chrono::milliseconds limit, int signal_fd);
  /// For a process that ends right after its job (sparkrun on one host): no finalize; PMIx is
  /// left running, its callbacks are cut off, and the process must leave with _exit, as after
  /// an abandoned finalize. The kernel closes PMIx's sockets; the job's tmpdir (rendezvous
  /// files) is the caller's to remove. Saves PMIx's teardown (~1 ms, and a thread hand-off
  /// per progress thread) when every client is gone anyway. The object must be leaked.
  void leave_to_exit();
  const PmixJob& job() const { return job_; }

 private:
  PmixHooks hooks_;
  PmixJob job_;
  bool finalized_ = false;
};

}  // namespace spark::launch
