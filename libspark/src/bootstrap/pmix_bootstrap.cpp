// PMIx client bootstrap: under sparkrun, `srun --mpi=pmix`, mpirun, or any PMIx server.
// Endpoints go through PMIx_Put/Commit, PMIx_Fence(collect) and PMIx_Get.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/node_layout.hpp"
#include "spark/error.hpp"
#include "spark/protocol/number.hpp"

#ifdef SPARK_HAVE_PMIX
#include <pmix.h>
#endif

namespace spark::bootstrap {

#ifdef SPARK_HAVE_PMIX
namespace {

// One pmix_value_t* from PMIx_Get, released on scope exit.
class PmixValue {
 public:
  PmixValue() = default;
  ~PmixValue() {
    if (value_ != nullptr) PMIX_VALUE_RELEASE(value_);
  }
  PmixValue(const PmixValue&) = delete;
  PmixValue& operator=(const PmixValue&) = delete;
  pmix_value_t** out() noexcept { return &value_; }
  const pmix_value_t* get() const noexcept { return value_; }

 private:
  pmix_value_t* value_ = nullptr;
};

std::optional<long long> as_integer(const pmix_value_t& v) {
  switch (v.type) {
    case PMIX_UINT8:
      return v.data.uint8;
    case PMIX_UINT16:
      return v.data.uint16;
    case PMIX_UINT32:
      return v.data.uint32;
    case PMIX_UINT64:
      return static_cast<long long>(v.data.uint64);
    case PMIX_INT:
      return v.data.integer;
    case PMIX_INT32:
      return v.data.int32;
    case PMIX_INT64:
      return v.data.int64;
    case PMIX_SIZE:
      return static_cast<long long>(v.data.size);
    case PMIX_PROC_RANK:
      return v.data.rank;
    default:
      return std::nullopt;
  }
}

// OpenPMIx's server (4.2 and 5.0) reads a client's handshake with a blocking read on its only
// thread: a client stopped between connect() and its handshake (a rank under SIGSTOP, or any
// local process that connects and sends nothing) holds every other client of that server, and
// the server's own fence timeout never fires. Every wait of a rank on its server is therefore
// bounded on the rank's side: the handshake, the fence and the abort (docs/reliability.md, "A
// held PMIx server").
constexpr std::chrono::milliseconds kServerAnswerGrace{2000};
// A live server takes an abort in milliseconds, even at load 16; this is for a held one.
constexpr std::chrono::milliseconds kAbortAnswerWait{5000};

int whole_seconds(std::chrono::milliseconds ms) {
  // PMIx counts whole seconds; round up so that a short timeout never becomes "infinite" (0).
  return static_cast<int>(std::max<std::int64_t>(1, (ms.count() + 999) / 1000));
}

// The client's wait for the server's answer to its handshake: OpenPMIx's MCA variable, read
// from the environment by PMIx_Init. A value the user set is kept. Returns the wait in seconds
// (for the message that says what was waited for), nullopt when the user's value is not a number.
// OpenPMIx 5.0 reads the variable but does not bound that wait with it (seen with 5.0.7: a
// silent connection held PMIx_Init for the holder's whole 40 s), so PMIx_Init itself is waited
// for with the same bound too (init_within).
std::optional<int> bound_handshake_wait(std::chrono::milliseconds join) {
  const char* name = "PMIX_MCA_ptl_base_handshake_wait_time";
  if (const char* set = std::getenv(name)) {
    std::int64_t seconds = 0;
    if (protocol::parse_integer(set, 0, std::numeric_limits<int>::max(), seconds) !=
        protocol::Integer::ok)
      return std::nullopt;
    return static_cast<int>(seconds);
  }
  const int seconds = whole_seconds(join + kServerAnswerGrace);
  ::setenv(name, std::to_string(seconds).c_str(), 0);
  return seconds;
}

// The answer to one PMIx call that may never come (a held server). Shared with the call's
// completion, which may come after the rank gave up waiting (or never, once PMIx is finalized
// or the rank has exited): the completion holds its own reference.
class PendingAnswer {
 public:
  void complete(pmix_status_t status) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      status_ = status;
      done_ = true;
    }
    done_cv_.notify_all();
  }
  // The call's status, or nullopt when it did not answer by `deadline`.
  std::optional<pmix_status_t> wait_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!done_cv_.wait_until(lock, deadline, [&] { return done_; })) return std::nullopt;
    return status_;
  }
  // For PMIx's C callbacks: cbdata is a heap-held reference, released by the callback.
  static void on_done(pmix_status_t status, void* cbdata) {
    std::unique_ptr<std::shared_ptr<PendingAnswer>> self(
        static_cast<std::shared_ptr<PendingAnswer>*>(cbdata));
    (*self)->complete(status);
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  pmix_status_t status_ = PMIX_SUCCESS;
};

// A fence in flight: its answer and its arguments, which PMIx may read until it answers.
struct FenceCall : PendingAnswer {
  pmix_info_t info[2];
};

// PMIx_Init on a thread, waited for until `deadline` (none: unbounded). Its identity is written
// by that thread before complete(), so it is read only after an answer. On nullopt the call is
// left running: it holds its own reference, and the rank is about to fail its bootstrap.
struct InitCall : PendingAnswer {
  pmix_proc_t self{};
};
std::optional<pmix_status_t> init_within(
    pmix_proc_t& self, std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!deadline) return PMIx_Init(&self, nullptr, 0);
  auto call = std::make_shared<InitCall>();
  try {
    std::thread([call] { call->complete(PMIx_Init(&call->self, nullptr, 0)); }).detach();
  } catch (const std::system_error&) {  // no thread to spare: ask inline, unbounded
    return PMIx_Init(&self, nullptr, 0);
  }
  const std::optional<pmix_status_t> rc = call->wait_until(*deadline);
  if (rc) self = call->self;
  return rc;
}

class PmixBootstrap final : public Bootstrap {
 public:
  explicit PmixBootstrap(const config::Config& config)
      : print_abort_(!config.value("SPARK_JOB_ID")) {
    const std::chrono::milliseconds join(config.join_timeout_ms());
    const std::optional<int> handshake_wait_s = bound_handshake_wait(join);
    const auto started = std::chrono::steady_clock::now();
    // The handshake's own bound (0: the user asked PMIx to wait without one); a user's value
    // that is not a number leaves PMIx's default, and this bound the default's.
    const int bound_s = handshake_wait_s.value_or(whole_seconds(join + kServerAnswerGrace));
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (bound_s > 0) deadline = started + std::chrono::seconds(bound_s);
    const std::optional<pmix_status_t> answered = init_within(self_, deadline);
    const pmix_status_t rc = answered.value_or(PMIX_ERR_UNREACH);
    if (!answered ||
        (rc == PMIX_ERR_UNREACH && std::chrono::steady_clock::now() - started >= join)) {
      const char* rank = std::getenv("PMIX_RANK");
      throw BootstrapError(fmt::format(
          "PMIx: rank {}: the PMIx server did not answer this rank's handshake within {} "
          "(PMIX_MCA_ptl_base_handshake_wait_time; by default SPARK_JOIN_TIMEOUT_MS + {} ms): "
          "its thread is held by another process connected to it (a rank stopped by SIGSTOP "
          "or a debugger while connecting, or a foreign process)",
          rank != nullptr ? rank : "?", fmt::format("{} s", bound_s), kServerAnswerGrace.count()));
    }
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(fmt::format(
          "PMIx: PMIx_Init failed ({}) although PMIX_RANK/PMIX_NAMESPACE are set: the PMIx "
          "server that started this process is gone or incompatible. Run under sparkrun or "
          "srun --mpi=pmix, or unset the PMIX_* variables to use SPARK_RANK/SPARK_SIZE",
          PMIx_Error_string(rc)));
    }
    initialized_ = true;
    try {
      pmix_proc_t job = self_;
      job.rank = PMIX_RANK_WILDCARD;
      size_ = static_cast<int>(required(job, PMIX_JOB_SIZE));
      local_rank_ = static_cast<int>(optional(self_, PMIX_LOCAL_RANK).value_or(0));
      local_size_ = static_cast<int>(optional(job, PMIX_LOCAL_SIZE).value_or(1));
      if (auto n = config.integer("SPARK_NODE_RANK")) {
        node_rank_ = *n;  // sparkrun numbers nodes in host-list order
      } else {
        node_rank_ = static_cast<int>(optional(self_, PMIX_NODEID).value_or(0));
      }
      node_id_ = hostname().value_or(local_node_id(config));
      if (auto host = config.value("SPARK_HOST")) node_id_ = *host;
    } catch (...) {
      PMIx_Finalize(nullptr, 0);
      throw;
    }
  }

  ~PmixBootstrap() override {
    // A held server would not answer the finalize either (PMIx waits 2 s for it in vain).
    if (initialized_ && !server_held_) PMIx_Finalize(nullptr, 0);
  }

  std::string_view kind() const override { return "pmix"; }
  int rank() const override { return static_cast<int>(self_.rank); }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int node_rank() const override { return node_rank_; }
  std::string node_id() const override { return node_id_; }

  void put(const std::string& key, std::span<const std::byte> value) override {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    // PMIx_Put copies the bytes; the const_cast only satisfies its C signature.
    v.data.bo.bytes = const_cast<char*>(reinterpret_cast<const char*>(value.data()));
    v.data.bo.size = value.size();
    const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(
          fmt::format("PMIx: PMIx_Put(\"{}\") failed: {}", key, PMIx_Error_string(rc)));
    }
  }

  void commit() override {
    const pmix_status_t rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(fmt::format("PMIx: PMIx_Commit failed: {}", PMIx_Error_string(rc)));
    }
  }

  void fence(std::chrono::milliseconds timeout) override {
    auto answer = std::make_shared<FenceCall>();
    bool collect = true;
    int seconds = whole_seconds(timeout);
    pmix_info_t* info = answer->info;
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    auto held = std::make_unique<std::shared_ptr<PendingAnswer>>(answer);
    pmix_status_t rc = PMIx_Fence_nb(nullptr, 0, info, 2, &PendingAnswer::on_done, held.get());
    if (rc == PMIX_SUCCESS) {
      held.release();  // the callback owns it now
      // The server times the fence out at `timeout`; past the grace, it is not answering.
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(seconds) + kServerAnswerGrace;
      const std::optional<pmix_status_t> status = answer->wait_until(deadline);
      if (!status) {
        server_held_ = true;
        throw BootstrapError(fmt::format(
            "PMIx: rank {}: fence timed out after {} ms, and the PMIx server did not answer "
            "for {} ms more: its thread is held by a process connected to it (a rank stopped "
            "by SIGSTOP or a debugger while connecting, or a foreign process)",
            rank(), timeout.count(), kServerAnswerGrace.count()));
      }
      rc = *status;
    } else if (rc == PMIX_OPERATION_SUCCEEDED) {  // not started: no callback will come
      rc = PMIX_SUCCESS;
    }
    if (rc == PMIX_ERR_TIMEOUT) {
      throw BootstrapError(fmt::format(
          "PMIx: rank {}: fence timed out after {} ms: not every rank of the job reached it (a "
          "rank is stuck before init or was never started; the launcher's output says which)",
          rank(), timeout.count()));
    }
    if (rc != PMIX_SUCCESS) {
      throw BootstrapError(
          fmt::format("PMIx: rank {}: PMIx_Fence failed: {} (a rank of the job "
                      "has probably exited)",
                      rank(), PMIx_Error_string(rc)));
    }
  }

  std::vector<std::byte> get(int rank, const std::string& key) override {
    if (rank < 0 || rank >= size_) {
      throw InvalidUsage(fmt::format("bootstrap get: rank {} out of range 0..{}", rank, size_ - 1));
    }
    pmix_proc_t proc = self_;
    proc.rank = static_cast<pmix_rank_t>(rank);
    PmixValue value;
    const pmix_status_t rc = PMIx_Get(&proc, key.c_str(), nullptr, 0, value.out());
    if (rc != PMIX_SUCCESS || value.get() == nullptr) {
      throw BootstrapError(fmt::format("PMIx: rank {} has not published \"{}\": {}", rank, key,
                                       PMIx_Error_string(rc)));
    }
    if (value.get()->type != PMIX_BYTE_OBJECT) {
      throw BootstrapError(fmt::format("PMIx: \"{}\" of rank {} is not a byte object", key, rank));
    }
    const auto& bo = value.get()->data.bo;
    const auto* p = reinterpret_cast<const std::byte*>(bo.bytes);
    return {p, p + bo.size};
  }

  bool abort_ends_the_group() const noexcept override { return true; }
  void abort(int status, const std::string& message) noexcept override {
    const int code = status == 0 ? 1 : status;
    if (print_abort_) {
      // Not under sparkrun (which prints every abort message itself): srun's PMIx plugin and
      // others drop the message, so the record goes to this rank's stderr too.
      std::fprintf(stderr, "spark: rank %u: aborting the job: %s\n",
                   static_cast<unsigned>(self_.rank), message.c_str());
    }
    std::fflush(nullptr);  // keep what the application printed: the launcher kills us next
    // Asks the server to end the whole job (every rank, every node) with this message.
    // PMIx_Abort waits for the server's answer, which a held server never gives: it runs on a
    // thread, and past kAbortAnswerWait this rank leaves by itself (its exit ends the job).
    std::optional<pmix_status_t> reply;
    try {  // anything that allocates is in here: this function is noexcept
      auto answer = std::make_shared<PendingAnswer>();
      std::thread([answer, message, code] {
        answer->complete(PMIx_Abort(code, message.c_str(), nullptr, 0));
      }).detach();
      reply = answer->wait_until(std::chrono::steady_clock::now() + kAbortAnswerWait);
    } catch (const std::exception&) {  // no thread to spare: ask inline, unbounded
      reply = PMIx_Abort(code, message.c_str(), nullptr, 0);
    }
    const bool answered = reply.has_value();
    if (!answered) {
      std::fprintf(stderr,
                   "spark: rank %u: the PMIx server did not take the abort within %lld ms (its "
                   "thread is held); leaving with status %d: %s\n",
                   static_cast<unsigned>(self_.rank),
                   static_cast<long long>(kAbortAnswerWait.count()), code, message.c_str());
      std::fflush(stderr);
    } else if (*reply != PMIX_SUCCESS) {
      std::fprintf(stderr, "spark: rank %u: PMIx_Abort failed (%s): %s\n",
                   static_cast<unsigned>(self_.rank), PMIx_Error_string(*reply), message.c_str());
      std::fflush(stderr);
    }
    _exit(code);
  }

 private:
  long long required(const pmix_proc_t& proc, const char* key) {
    if (auto v = optional(proc, key)) return *v;
    throw BootstrapError(
        fmt::format("PMIx: the server does not provide {}: it is not a "
                    "complete PMIx launcher",
                    key));
  }

  std::optional<long long> optional(const pmix_proc_t& proc, const char* key) {
    PmixValue value;
    if (PMIx_Get(&proc, key, nullptr, 0, value.out()) != PMIX_SUCCESS || value.get() == nullptr) {
      return std::nullopt;
    }
    return as_integer(*value.get());
  }

  std::optional<std::string> hostname() {
    PmixValue value;
    if (PMIx_Get(&self_, PMIX_HOSTNAME, nullptr, 0, value.out()) != PMIX_SUCCESS ||
        value.get() == nullptr || value.get()->type != PMIX_STRING ||
        value.get()->data.string == nullptr) {
      return std::nullopt;
    }
    return std::string(value.get()->data.string);
  }

  pmix_proc_t self_{};
  bool initialized_ = false;
  bool server_held_ = false;  ///< a fence found the server not answering (see kServerAnswerGrace)
  bool print_abort_ = false;  ///< no SPARK_JOB_ID: the PMIx server is not sparkrun
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_rank_ = 0;
  std::string node_id_;
};

}  // namespace

std::unique_ptr<Bootstrap> make_pmix_bootstrap(const config::Config& config) {
  return std::make_unique<PmixBootstrap>(config);
}

#else  // !SPARK_HAVE_PMIX

std::unique_ptr<Bootstrap> make_pmix_bootstrap(const config::Config&) {
  throw BootstrapError(
      "PMIx bootstrap requested but libspark was built without PMIx: install libpmix-dev and "
      "rebuild with -DSPARK_ENABLE_PMIX=ON");
}

#endif

}  // namespace spark::bootstrap
