#include "pmix_server.hpp"

#include <pmix.h>
#include <pmix_server.h>
#include <unistd.h>

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace spark::launch {
namespace {

// PMIx's server callbacks carry no context pointer for fence; PMIx itself is a process-wide
// singleton, so the one server instance is reachable from here while it exists.
// Atomic: an abandoned finalize (PmixServer::finalize) clears it while PMIx's thread may
// still run a callback.
std::atomic<PmixServer*> g_server{nullptr};
std::atomic<bool> g_abandoned{false};

std::string pmix_error(const char* what, pmix_status_t rc) {
  return std::string("PMIx server: ") + what + " failed: " + PMIx_Error_string(rc);
}

// Waits for PMIx op callbacks (makes registration synchronous). Several operations can share
// one latch: PMIx runs them in order on its thread, and one wait costs one thread hand-off
// instead of one per operation (each costs milliseconds on a loaded machine).
struct Latch {
  std::mutex m;
  std::condition_variable cv;
  int pending = 0;
  pmix_status_t status = PMIX_SUCCESS;

  static void callback(pmix_status_t status, void* cbdata) {
    auto* l = static_cast<Latch*>(cbdata);
    std::lock_guard<std::mutex> lock(l->m);
    if (status != PMIX_SUCCESS && l->status == PMIX_SUCCESS) l->status = status;
    --l->pending;
    l->cv.notify_all();
  }
  // Call before starting an operation that reports to callback().
  void expect() {
    std::lock_guard<std::mutex> lock(m);
    ++pending;
  }
  // The operation's immediate return: done already, failed, or pending.
  void started(pmix_status_t rc) {
    if (rc == PMIX_SUCCESS) return;  // the callback will come
    std::lock_guard<std::mutex> lock(m);
    --pending;
    if (rc != PMIX_OPERATION_SUCCEEDED && status == PMIX_SUCCESS) status = rc;
  }
  pmix_status_t wait() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return pending == 0; });
    return status;
  }
};

// RAII for an info list built with PMIx_Info_list_*.
class InfoList {
 public:
  InfoList() : list_(PMIx_Info_list_start()) {}
  ~InfoList() { PMIx_Info_list_release(list_); }
  InfoList(const InfoList&) = delete;
  InfoList& operator=(const InfoList&) = delete;
  void add(const char* key, const void* value, pmix_data_type_t type) {
    pmix_status_t rc = PMIx_Info_list_add(list_, key, value, type);
    if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error(key, rc));
  }
  void str(const char* key, const std::string& v) { add(key, v.c_str(), PMIX_STRING); }
  void u32(const char* key, uint32_t v) { add(key, &v, PMIX_UINT32); }
  void u16(const char* key, uint16_t v) { add(key, &v, PMIX_UINT16); }
  void rank(const char* key, pmix_rank_t v) { add(key, &v, PMIX_PROC_RANK); }
  void boolean(const char* key, bool v) { add(key, &v, PMIX_BOOL); }
  // Nested array (e.g. per-proc data): converted now, copied by add().
  void array(const char* key, InfoList& inner) {
    pmix_data_array_t darray;
    std::memset(&darray, 0, sizeof darray);
    pmix_status_t rc = PMIx_Info_list_convert(inner.list_, &darray);
    if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error("info list", rc));
    add(key, &darray, PMIX_DATA_ARRAY);
    PMIx_Data_array_destruct(&darray);
  }
  // The flat array for a PMIx call; owned by `out` until destruct.
  void to_array(pmix_data_array_t& out) {
    std::memset(&out, 0, sizeof out);
    pmix_status_t rc = PMIx_Info_list_convert(list_, &out);
    if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error("info list", rc));
  }

 private:
  void* list_;
};

class DataArray {
 public:
  DataArray() { std::memset(&a_, 0, sizeof a_); }
  ~DataArray() { PMIx_Data_array_destruct(&a_); }
  DataArray(const DataArray&) = delete;
  DataArray& operator=(const DataArray&) = delete;
  pmix_data_array_t& get() { return a_; }
  pmix_info_t* info() { return static_cast<pmix_info_t*>(a_.array); }
  size_t size() const { return a_.size; }

 private:
  pmix_data_array_t a_;
};

std::string join(const std::vector<int>& v, char sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(sep);
    s += std::to_string(v[i]);
  }
  return s;
}

int rank_of(const pmix_proc_t* proc) {
  return proc == nullptr ? -1 : static_cast<int>(proc->rank);
}

// --- callbacks (PMIx progress thread) -----------------------------------------------

pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  PmixServer* server = g_server.load();
  if (server && server->hooks().connected) server->hooks().connected(rank_of(proc));
  return PMIX_OPERATION_SUCCEEDED;
}

pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t, void*) {
  PmixServer* server = g_server.load();
  if (server && server->hooks().finalized) server->hooks().finalized(rank_of(proc));
  return PMIX_OPERATION_SUCCEEDED;
}

// How long PMIx's thread waits for the runner to record an abort. The runner's loop
// never calls into PMIx while it handles one, so this bound only matters at teardown.
constexpr auto kAbortRecordWait = std::chrono::seconds(2);

pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[],
                       size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
  PmixServer* server = g_server.load();
  if (server == nullptr || !server->hooks().abort) return PMIX_ERR_NOT_SUPPORTED;
  // The client stays blocked in PMIx_Abort until the runner has recorded the abort, so the
  // abort (not the rank's exit) is the first failure. The wait happens here, on PMIx's
  // thread, and cbfunc is called from this thread before returning: calling it later from
  // the runner's thread raced with PMIx's own thread (abort replies queued from a foreign
  // thread left PMIx_server_finalize waiting forever, about 1 run in 3).
  struct Recorded {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
  };
  auto recorded = std::make_shared<Recorded>();
  server->hooks().abort(rank_of(proc), status, msg ? msg : "", [recorded] {
    std::lock_guard<std::mutex> lock(recorded->m);
    recorded->done = true;
    recorded->cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(recorded->m);
    recorded->cv.wait_for(lock, kAbortRecordWait, [&] { return recorded->done; });
  }
  if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
  return PMIX_SUCCESS;
}

struct FenceRelease {
  std::string data;
  static void release(void* p) { delete static_cast<FenceRelease*>(p); }
};

pmix_status_t on_fence(const pmix_proc_t[], size_t, const pmix_info_t[], size_t, char* data,
                       size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
  PmixServer* server = g_server.load();
  if (server == nullptr || !server->hooks().fence) {
    // No host-level fence: this node is the whole job. Completed here, on PMIx's thread.
    if (cbfunc) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, nullptr, nullptr);
    return PMIX_SUCCESS;
  }
  FenceRequest req;
  req.data.assign(data ? data : "", ndata);
  req.complete = [cbfunc, cbdata](std::string all) {
    auto* keep = new FenceRelease{std::move(all)};
    cbfunc(PMIX_SUCCESS, keep->data.data(), keep->data.size(), cbdata, &FenceRelease::release,
           keep);
  };
  server->hooks().fence(std::move(req));
  return PMIX_SUCCESS;
}

// PMIx removes the files and folders that clients register for cleanup (PMIX_REGISTER_CLEANUP,
// e.g. Open MPI 5's 16 MiB shared-memory segments in /dev/shm) when the client ends (or, for a
// whole job's, when its namespace does: at a finalize, which sparkrun on one host skips),
// without asking the host; but it refuses every job-control request, cleanup included, of a
// host that has no job_control hook. What reaches this hook is everything else: not done here.
pmix_status_t on_job_control(const pmix_proc_t*, const pmix_proc_t[], size_t, const pmix_info_t[],
                             size_t, pmix_info_cbfunc_t, void*) {
  return PMIX_ERR_NOT_SUPPORTED;
}

pmix_server_module_t make_module() {
  pmix_server_module_t m;
  std::memset(&m, 0, sizeof m);
  m.client_connected = on_connected;
  m.client_finalized = on_finalized;
  m.abort = on_abort;
  m.fence_nb = on_fence;
  m.job_control = on_job_control;
  return m;
}

pmix_server_module_t g_module = make_module();

}  // namespace

PmixServer::PmixServer(const std::string& tmpdir, PmixHooks hooks, void* hwloc_topology)
    : hooks_(std::move(hooks)) {
  if (g_server != nullptr) throw std::logic_error("PmixServer: only one per process");
  // The shared-memory data stores (gds ds21/ds12) build memory segments for the job at
  // registration; with a handful of local ranks the plain hash store is ~20 ms faster
  // end to end (docs/launcher.md). Clients follow the server's choice (PMIX_GDS_MODULE).
  // A user's own PMIX_MCA_gds wins.
  setenv("PMIX_MCA_gds", "hash", 0);
  // Two components PMIx dlopens at every server start (~0.25 ms each on an idle machine,
  // measured with paired runs): zlib string compression, which only pays for multi-kB
  // values (clients keep their own, and inflate what they get; the server only passes
  // values and regexes on, which then use PMIx's built-in native form), and the SLURM
  // resource-manager glue, which has nothing to do outside a SLURM job. Only this server's
  // process is affected (ranks get the environment sparkrun started with); a user's own
  // setting wins.
  setenv("PMIX_MCA_pcompress", "^zlib", 0);
  if (std::getenv("SLURM_JOB_ID") == nullptr && std::getenv("SLURM_JOBID") == nullptr)
    setenv("PMIX_MCA_prm", "^slurm", 0);
  InfoList info;
  info.str(PMIX_SERVER_TMPDIR, tmpdir);
  info.str(PMIX_SYSTEM_TMPDIR, tmpdir);
  // Only local ranks ever connect: listen on loopback, IPv4 only (one listener instead of
  // two, and no walk over every interface).
  info.boolean(PMIX_TCP_DISABLE_IPV6, true);
  info.str(PMIX_TCP_IF_INCLUDE, "lo");
  pmix_topology_t topo;
  char source[] = "hwloc";
  if (hwloc_topology != nullptr) {
    topo.source = source;
    topo.topology = hwloc_topology;
    info.add(PMIX_TOPOLOGY2, &topo, PMIX_TOPO);
  }
  DataArray arr;
  info.to_array(arr.get());
  g_server = this;
  pmix_status_t rc = PMIx_server_init(&g_module, arr.info(), arr.size());
  if (rc != PMIX_SUCCESS) {
    g_server = nullptr;
    throw std::runtime_error(pmix_error("PMIx_server_init", rc));
  }
}

PmixServer::~PmixServer() {
  if (!finalized_) finalize(std::chrono::seconds(5), -1);
}

bool finalize_abandoned() {
  return g_abandoned.load();
}

bool PmixServer::finalize(std::chrono::milliseconds limit, int signal_fd) {
  if (finalized_) return true;
  finalized_ = true;
  // PMIx_server_finalize waits for PMIx's thread; a client that died mid-operation has been
  // seen to leave it waiting forever. It runs on a helper thread so that the launcher can
  // give up after `limit`, or at once on SIGINT/SIGTERM/SIGHUP/SIGQUIT (read from
  // `signal_fd`, the runner's signalfd), and still exit with the job's code: never a hang.
  // No separate deregister_nspace: finalize releases the job too.
  const int done_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (done_fd < 0) {  // no way to wait with a bound: finalize inline
    PMIx_server_finalize();
    g_server = nullptr;
    return true;
  }
  std::thread worker([done_fd] {
    PMIx_server_finalize();
    uint64_t one = 1;
    ssize_t n = ::write(done_fd, &one, sizeof one);
    (void)n;
  });
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool done = false;
  bool stop = false;
  while (!done && !stop) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    struct pollfd fds[2] = {{done_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    int n = ::poll(fds, signal_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) done = true;
    if (signal_fd >= 0 && (fds[1].revents & POLLIN)) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        const int signo = static_cast<int>(si.ssi_signo);
        if (signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT) stop = true;
      }
    }
  }
  if (done) {
    worker.join();
    ::close(done_fd);
    g_server = nullptr;
    return true;
  }
  // Abandoned: PMIx's threads keep running, so its state (and done_fd) must stay valid
  // until the process ends; the caller exits without running PMIx's teardown.
  worker.detach();
  g_server = nullptr;
  g_abandoned = true;
  return false;
}

void PmixServer::leave_to_exit() {
  if (finalized_) return;
  finalized_ = true;
  g_server = nullptr;  // a late callback (a rank's straggling child) finds no server
  g_abandoned = true;
}

void PmixServer::register_job(const PmixJob& job, uid_t uid, gid_t gid) {
  job_ = job;
  const auto& local = job.node_ranks.at(static_cast<size_t>(job.this_node));
  std::string hosts_csv;
  std::string ppn_input;
  for (size_t n = 0; n < job.node_hosts.size(); ++n) {
    if (n) {
      hosts_csv.push_back(',');
      ppn_input.push_back(';');
    }
    hosts_csv += job.node_hosts[n];
    ppn_input += join(job.node_ranks[n], ',');
  }
  char* node_map = nullptr;
  char* proc_map = nullptr;
  pmix_status_t rc = PMIx_generate_regex(hosts_csv.c_str(), &node_map);
  if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error("PMIx_generate_regex", rc));
  rc = PMIx_generate_ppn(ppn_input.c_str(), &proc_map);
  if (rc != PMIX_SUCCESS) {
    free(node_map);
    throw std::runtime_error(pmix_error("PMIx_generate_ppn", rc));
  }
  const std::string nsdir = job.tmpdir + "/" + job.nspace;
  const std::string& host = job.node_hosts.at(static_cast<size_t>(job.this_node));

  InfoList info;
  info.u32(PMIX_UNIV_SIZE, static_cast<uint32_t>(job.universe_size));
  info.u32(PMIX_JOB_SIZE, static_cast<uint32_t>(job.size));
  info.u32(PMIX_MAX_PROCS, static_cast<uint32_t>(job.universe_size));
  info.str(PMIX_JOBID, job.nspace);
  info.u32(PMIX_JOB_NUM_APPS, 1);
  info.rank(PMIX_NPROC_OFFSET, 0);
  info.u32(PMIX_NUM_NODES, static_cast<uint32_t>(job.node_hosts.size()));
  // The maps are PMIx "regex" blobs: bytes with a NUL inside, passed as PMIX_REGEX.
  info.add(PMIX_NODE_MAP, node_map, PMIX_REGEX);
  info.add(PMIX_PROC_MAP, proc_map, PMIX_REGEX);
  free(node_map);
  free(proc_map);
  info.str(PMIX_LOCAL_PEERS, join(local, ','));
  info.u32(PMIX_LOCAL_SIZE, static_cast<uint32_t>(local.size()));
  info.rank(PMIX_LOCALLDR, static_cast<pmix_rank_t>(local.empty() ? 0 : local.front()));
  info.str(PMIX_TMPDIR, job.tmpdir);
  info.str(PMIX_NSDIR, nsdir);
  info.str(PMIX_HOSTNAME, host);
  info.u32(PMIX_NODEID, static_cast<uint32_t>(job.this_node));
  info.u32(PMIX_APPNUM, 0);
  info.rank(PMIX_APPLDR, 0);
  info.u32(PMIX_APP_SIZE, static_cast<uint32_t>(job.size));

  for (size_t n = 0; n < job.node_ranks.size(); ++n) {
    const auto& ranks = job.node_ranks[n];
    for (size_t l = 0; l < ranks.size(); ++l) {
      InfoList proc;
      proc.rank(PMIX_RANK, static_cast<pmix_rank_t>(ranks[l]));
      proc.rank(PMIX_GLOBAL_RANK, static_cast<pmix_rank_t>(ranks[l]));
      proc.rank(PMIX_APP_RANK, static_cast<pmix_rank_t>(ranks[l]));
      proc.u32(PMIX_APPNUM, 0);
      proc.u16(PMIX_LOCAL_RANK, static_cast<uint16_t>(l));
      // PMIx's node rank counts every job on the node; sparkrun runs one job per node.
      proc.u16(PMIX_NODE_RANK, static_cast<uint16_t>(l));
      proc.u32(PMIX_NODEID, static_cast<uint32_t>(n));
      proc.str(PMIX_HOSTNAME, job.node_hosts[n]);
      if (static_cast<int>(n) == job.this_node) {
        proc.str(PMIX_PROCDIR, nsdir + "/" + std::to_string(ranks[l]));
        // Binding (topology part, docs/binding.md): the cpus the rank was bound to before
        // exec, the same text as SPARK_CPUSET. (PMIx_server_generate_locality_string crashed
        // in PMIx 4.2.2 with the topology handed over by LocalTopology: no locality string.)
        if (l < job.cpusets.size() && !job.cpusets[l].empty()) {
          proc.str(PMIX_CPUSET, job.cpusets[l]);
        }
      }
      info.array(PMIX_PROC_DATA, proc);
    }
  }

  DataArray arr;
  info.to_array(arr.get());
  // The namespace and this node's clients in one batch, then one wait.
  Latch latch;
  latch.expect();
  latch.started(PMIx_server_register_nspace(job.nspace.c_str(), static_cast<int>(local.size()),
                                            arr.info(), arr.size(), &Latch::callback, &latch));
  for (int r : local) {
    pmix_proc_t proc;
    std::memset(&proc, 0, sizeof proc);
    std::strncpy(proc.nspace, job.nspace.c_str(), PMIX_MAX_NSLEN);
    proc.rank = static_cast<pmix_rank_t>(r);
    latch.expect();
    latch.started(PMIx_server_register_client(&proc, uid, gid, nullptr, &Latch::callback, &latch));
  }
  rc = latch.wait();
  if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error("registering the job", rc));
}

std::vector<EnvVar> PmixServer::client_env(int rank) {
  pmix_proc_t proc;
  std::memset(&proc, 0, sizeof proc);
  std::strncpy(proc.nspace, job_.nspace.c_str(), PMIX_MAX_NSLEN);
  proc.rank = static_cast<pmix_rank_t>(rank);
  pmix_status_t rc;
  char** env = nullptr;
  rc = PMIx_server_setup_fork(&proc, &env);
  if (rc != PMIX_SUCCESS) throw std::runtime_error(pmix_error("setup_fork", rc));
  std::vector<EnvVar> out;
  for (char** e = env; e && *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) out.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    free(*e);
  }
  free(env);
  return out;
}

}  // namespace spark::launch
