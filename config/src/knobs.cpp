// The declarative knob table: the single source of truth for every environment variable
// libspark reads, and for the other SPARK_* names (tool paths, scripts, test hooks).
// docs/configuration.md and `sparkrun --print-config` are generated from it.
#include <algorithm>
#include <type_traits>

#include "spark/config/config.hpp"
#include "spark/protocol/cpu_isa.hpp"
#include "spark/protocol/transports.hpp"

namespace spark::config {
namespace {

constexpr std::int64_t kMaxRanks = 1 << 20;
// A row's binding: the CommOptions member it fills from its validated value.
template <auto Member>
void fill(CommOptions& o, const Knob& knob, const std::string& value) {
  auto& field = o.*Member;
  using T = std::remove_cvref_t<decltype(field)>;
  if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>)
    field = value;
  else if constexpr (std::is_same_v<T, bool>)  // a choice: its first word is true
    field = value == knob.choices.substr(0, knob.choices.find('|'));
  else  // integers, std::optional<int>
    field = static_cast<T>(parse_integer(knob, value));
}
void fill_ports(CommOptions& o, const Knob& knob, const std::string& value) {
  o.tcp_ports = parse_port_range(knob, value);
}
void fill_cpu_isa(CommOptions& o, const Knob&, const std::string& value) {
  // The table accepted the word: one of cpu_isa_from_word's.
  o.max_cpu_isa = coll::cpu_isa_from_word(value).value_or(coll::kWidestCpuIsa);
}
void fill_spin(CommOptions& o, const Knob& knob, const std::string& value) {
  o.spin_us = static_cast<std::uint32_t>(parse_integer(knob, value));
  o.spin_auto = false;
}

// SPARK_TRANSPORT's words and help, from the transport registry.
#define SPARK_TRANSPORT_CHOICE(name, local, doc) "|" #name
#define SPARK_TRANSPORT_DOC(name, local, doc) " " #name ": " doc "."
constexpr std::string_view kTransportChoices = "auto" SPARK_TRANSPORTS(SPARK_TRANSPORT_CHOICE);
// SPARK_MAX_CPU_ISA's words, from the levels the folds are built for.
#define SPARK_CPU_ISA_CHOICE(e, name) "|" name
constexpr std::string_view kCpuIsaChoices = "auto" SPARK_CPU_ISAS(SPARK_CPU_ISA_CHOICE);

// Field order: name, type, default, doc, kind, origin, min, max, choices, and for the
// communicator's knobs the CommOptions member they fill, then KnobScope::job for the knobs
// every rank must share (the wire-up compares them: comm/settings_digest.hpp). Why those:
// the transport and the lanes per peer decide what both ends of a connection expect; the
// two deadlines decide which rank gives up first and so whom a failure record blames; the
// job id names the shm segments both ends open.
// clang-format off
constexpr Knob kKnobs[] = {
    // --- fail-stop -----------------------------------------------------------------------------
    {"SPARKNET_ROCE_TIMEOUT_MS", "milliseconds", "10000",
     "How long every wait on a peer may take before the communicator fails with a record naming "
     "rank, peer, lane and sequence number. Applies to every transport (roce, tcp, shm) and to "
     "the ring relay. Change it at run time with comm.set_timeout_ms().",
     KnobType::milliseconds, KnobOrigin::user, 1, 3'600'000, {}, &fill<&CommOptions::timeout_ms>,
     KnobScope::job},
    {"SPARK_ON_FAILURE", "abort|raise", "abort",
     "What a rank does when its communicator fails. abort: report the record to the launcher "
     "(PMIx_Abort, or rank 0's rendezvous) and end the whole rank group at once. raise: only "
     "fail the communicator (every call throws spark::CommFailure / returns "
     "SPARK_ERR_COMM_FAILED); the application reads the record and must exit itself.",
     KnobType::choice, KnobOrigin::user, 0, 0, "abort|raise", &fill<&CommOptions::report_failures>},
    {"SPARK_BARRIER_TIMEOUT_MS", "milliseconds", "600000",
     "Deadline of spark::barrier() (and the barrier at the end of init). Long on purpose: call "
     "barrier() after model loading or JIT so that SPARKNET_ROCE_TIMEOUT_MS only measures "
     "communication.",
     KnobType::milliseconds, KnobOrigin::user, 1, 86'400'000, {},
     &fill<&CommOptions::barrier_timeout_ms>, KnobScope::job},
    {"SPARK_JOIN_TIMEOUT_MS", "milliseconds", "60000",
     "How long the environment rendezvous waits for every rank to join (connect to rank 0's "
     "store, reach a fence). On expiry the error names the ranks that never arrived.",
     KnobType::milliseconds, KnobOrigin::user, 1, 3'600'000, {},
     &fill<&CommOptions::join_timeout_ms>},
    // --- transports ----------------------------------------------------------------------------
    {"SPARK_TRANSPORT", kTransportChoices, "auto",
     "Transport for every peer. auto: shm for ranks on the same node; across nodes roce to each "
     "peer the fabric map's RDMA lanes reach (directly or through one relay), tcp with a note "
     "where none does."
     SPARK_TRANSPORTS(SPARK_TRANSPORT_DOC),
     KnobType::choice, KnobOrigin::user, 0, 0, kTransportChoices, &fill<&CommOptions::transport>,
     KnobScope::job},
    {"SPARK_TCP_LANES", "integer", "2",
     "TCP connections per peer; large messages are striped across them.", KnobType::integer,
     KnobOrigin::user, 1, 16, {}, &fill<&CommOptions::tcp_lanes>, KnobScope::job},
    {"SPARK_TCP_ADDR", "IPv4 address", "",
     "Address the tcp transport listens on and publishes. Unset: the address of the interface "
     "that reaches the rendezvous or the node's primary address.",
     KnobType::string, KnobOrigin::user, 0, 0, {}, &fill<&CommOptions::tcp_addr>},
    {"SPARK_TCP_PORT_RANGE", "port range", "",
     "Ports the data plane listens on, for firewalls (Open MPI's btl_tcp_port_min_v4 and "
     "_range_v4): each rank's tcp transport listener (its lanes and relay hops), the fabric "
     "probe listener, RoCE's liveness listener and the fabric / doctor probes take the first "
     "free port of FIRST-LAST (one PORT: just that one). Each rank needs one port, a node's "
     "first rank one more; two jobs may share a range when it has room for both, and a job "
     "that finds every port taken fails at start naming the range. Unset: ephemeral ports.",
     KnobType::port_range, KnobOrigin::user, 0, 0, {}, &fill_ports},
    {"SPARK_DATA_NET", "subnet list", "",
     "Comma-separated IPv4 subnets (a.b.c.d/prefix) whose interfaces are data lanes for the "
     "fabric map (docs/fabric.md); keeps a control-only interface out. Unset: every up, "
     "non-loopback IPv4 interface.",
     KnobType::string, KnobOrigin::user, 0, 0, {}, &fill<&CommOptions::data_net>},
    {"SPARK_SHM_CMA", "on|off", "on",
     "Cross-memory attach between the ranks of a node (process_vm_readv/writev, tested on every "
     "peer at start-up): the single-copy allreduce and reduce_scatter from 32 KiB where the "
     "ranks' timings of both paths chose it (each size's first calls try both; "
     "docs/collectives.md, \"Chosen from what the machine measures\"). off: this "
     "rank reads and writes no peer's memory, and the allreduces of every communicator it "
     "is in go through the shm slots (one-shot or two-phase; the ranks agree). To "
     "compare the two paths, or where a sandbox must not see cross-process copies.",
     KnobType::choice, KnobOrigin::user, 0, 0, "on|off", &fill<&CommOptions::shm_cma>},
    {"SPARK_SHM_MEMBARRIER", "on|off", "on",
     "How a sleeping rank is sure to be woken by the shm message it waits for: on, the rank "
     "about to sleep pays for the memory barrier (membarrier(2), a few microseconds, only when "
     "it blocks) and every message is sent without one (~0.1 us of a 1 KiB allreduce); off, "
     "or where the kernel or a seccomp filter refuses membarrier, every message carries a full "
     "fence. Both ranks of a pair must have it on for either to use it (they agree at attach).",
     KnobType::choice, KnobOrigin::user, 0, 0, "on|off", &fill<&CommOptions::shm_membarrier>},
    {"SPARK_SHM_PTRACER", "parent|off", "parent",
     "Where Yama's ptrace_scope is 1 (Ubuntu's default), sibling processes may not read each "
     "other's memory, so the single copy would be off. parent: each rank declares its parent "
     "(sparkrun, slurmstepd: what started the node's ranks) as its ptracer "
     "(prctl(PR_SET_PTRACER)), which lets exactly that parent's descendants, the job's ranks, "
     "read it. off: declare nothing (the allreduces then go through the shm slots). Without "
     "Yama, or at another scope, nothing is declared (docs/collectives.md, Yama).",
     KnobType::choice, KnobOrigin::user, 0, 0, "parent|off", &fill<&CommOptions::shm_ptracer>},
    {"SPARK_SPIN_US", "microseconds", "",
     "Fixes how long every wait polls (hot, never yielding) before it blocks (futex, ppoll, completion "
     "channel); 0 blocks at once. Unset (recommended): the adaptive wait policy chooses per wait "
     "from the recent waits, the measured block-and-wake cost, whether CPUs are oversubscribed "
     "and the machine's load, spinning at most 200 us, with sched_yield() when the CPUs are "
     "shared by the job's ranks alone (docs/collectives.md, Waiting).",
     KnobType::integer, KnobOrigin::user, 0, 1'000'000, {}, &fill_spin},
    {"SPARK_MAX_CPU_ISA", kCpuIsaChoices, "auto",
     "The widest instruction-set level the reductions (the folds of allreduce, reduce_scatter "
     "and reduce) may use. auto: the widest this CPU has of those libspark is built with "
     "(x86-64: x86-64-v4 with AVX-512, x86-64-v3 with AVX2, baseline; other CPUs: baseline). "
     "Every level gives the same bits (a NaN may differ in sign or payload, and stays a NaN), "
     "so ranks on different CPUs agree; a cap is for comparing the levels, or for a CPU that "
     "slows its clock on wide vectors. Applied when a communicator is created (init); "
     "spark::reduce_local before that uses the widest level.",
     KnobType::choice, KnobOrigin::user, 0, 0, kCpuIsaChoices, &fill_cpu_isa},
    {"SPARK_IB_HCA", "device list", "",
     "Comma-separated RDMA devices to use (e.g. rocep1s0f0,roceP2p1s0f0). Unset: every CX7 "
     "function that reaches a peer.",
     KnobType::string, KnobOrigin::user, 0, 0, {}, &fill<&CommOptions::ib_hca>},
    {"SPARK_IB_GID_INDEX", "integer", "",
     "Pins the RoCE GID index. Unset (recommended): the IPv4 RoCEv2 GID is resolved per device "
     "from sysfs at start-up, because the index differs per node and can change.",
     KnobType::integer, KnobOrigin::user, 0, 255, {}, &fill<&CommOptions::ib_gid_index>},
    // --- bootstrap -----------------------------------------------------------------------------
    {"SPARK_BOOTSTRAP", "auto|pmix|env|singleton", "auto",
     "How ranks find each other. auto: PMIx when a PMIx server started the process (PMIX_RANK or "
     "PMIX_NAMESPACE set), else the environment rendezvous when SPARK_RANK/SPARK_SIZE or "
     "RANK/WORLD_SIZE are set, else a single rank.",
     KnobType::choice, KnobOrigin::user, 0, 0, "auto|pmix|env|singleton"},
    {"SPARK_RENDEZVOUS", "HOST:PORT", "",
     "Address of the environment rendezvous: rank 0 listens on PORT, the others connect to "
     "HOST:PORT. Falls back to MASTER_ADDR:MASTER_PORT.",
     KnobType::host_port, KnobOrigin::user, 0, 0, {}},
    {"SPARK_RANK", "integer", "", "This process's rank, 0..SPARK_SIZE-1.", KnobType::integer,
     KnobOrigin::launcher, 0, kMaxRanks - 1, {}, &fill<&CommOptions::launcher_rank>},
    {"SPARK_SIZE", "integer", "", "Number of ranks in the job.", KnobType::integer,
     KnobOrigin::launcher, 1, kMaxRanks, {}},
    {"SPARK_LOCAL_RANK", "integer", "",
     "Rank among the ranks of this node. The environment rendezvous derives it from SPARK_HOST "
     "when unset.",
     KnobType::integer, KnobOrigin::launcher, 0, kMaxRanks - 1, {}},
    {"SPARK_LOCAL_SIZE", "integer", "", "Number of ranks on this node.", KnobType::integer,
     KnobOrigin::launcher, 1, kMaxRanks, {}},
    {"SPARK_NODE_RANK", "integer", "", "Index of this rank's node in the job.", KnobType::integer,
     KnobOrigin::launcher, 0, kMaxRanks - 1, {}},
    {"SPARK_JOB_ID", "string", "", "Identifier of the job (names shared-memory segments, traces).",
     KnobType::string, KnobOrigin::launcher, 0, 0, {}, &fill<&CommOptions::job_id>,
     KnobScope::job},
    {"SPARK_HOST", "string", "",
     "Name of this rank's node from the launcher's host list: node identity for local ranks "
     "and shared memory. Unset: gethostname().",
     KnobType::string, KnobOrigin::launcher, 0, 0, {}},
    {"SPARK_CPUSET", "cpu list", "", "Cores this rank is bound to, e.g. 15-19 (informational).",
     KnobType::string, KnobOrigin::launcher, 0, 0, {}},
    {"SPARK_LANES", "device list", "",
     "RDMA functions chosen for this rank by the launcher's binding plan, e.g. "
     "rocep1s0f0,roceP2p1s0f0. A preference: toward a peer these do not reach, the fabric "
     "map's lanes are used (and the -v report says so).",
     KnobType::string, KnobOrigin::launcher, 0, 0, {}, &fill<&CommOptions::rdma_lanes>},
    {"SPARK_JOB_DIR", "path", "",
     "The node's job directory (private to the job's user, removed at the end): the libspark "
     "Python package writes its Python frames there when sparkrun collects stacks.",
     KnobType::path, KnobOrigin::launcher, 0, 0, {}},
    {"SPARK_RESTART_COUNT", "integer", "",
     "Which attempt of the job this is under sparkrun --max-restarts: 0 on the first, then 1 "
     "per restart of the whole group (a serving job can reload and tell its clients).",
     KnobType::integer, KnobOrigin::launcher, 0, 1'000'000, {}},
    // --- diagnostics ---------------------------------------------------------------------------
    {"SPARK_LOG", "LEVEL[:SUBSYS,...]", "warn",
     "Log level (error|warn|info|trace), optionally limited to subsystems (bootstrap, wireup, "
     "tcp, shm, roce, launch), e.g. info:bootstrap,wireup. info: what each start-up step chose "
     "and how long it took; trace: also each fence and endpoint. Lines are prefixed host:pid "
     "[rank] subsystem: (the launcher's [sparkrun], its node daemons' [daemon]).",
     KnobType::string, KnobOrigin::user, 0, 0, {}},
    {"SPARK_TRACE", "path", "",
     "Write a Chrome/Perfetto trace of every op and step wait. Under sparkrun the per-rank files "
     "are merged into PATH.",
     KnobType::path, KnobOrigin::user, 0, 0, {}, &fill<&CommOptions::trace_path>},
    {"SPARK_FLIGHT_RECORDER", "operations", "64",
     "How many of its last operations each rank keeps in its flight recorder (op, "
     "communicator, seq, bytes, peer, the lane and peer it waits on, times of its waits), in "
     "shared memory that sparkrun reads: `sparkrun status` and the report of a failed job "
     "show them. 0: no recorder.",
     KnobType::integer, KnobOrigin::user, 0, 65536, {}, &fill<&CommOptions::flight_ops>},
    {"SPARK_REPORT_DIR", "path", "",
     "Where sparkrun makes a failed job's report folder (report.JOBID: the ranks' flight "
     "recorders, stacks after a timeout) when --report-dir is not given. Unset: sparkrun's "
     "directory.",
     KnobType::path, KnobOrigin::user, 0, 0, {}},
    {"SPARK_TOPOLOGY_XML", "path", "",
     "Load the hwloc topology from this XML file instead of discovering the machine.",
     KnobType::path, KnobOrigin::user, 0, 0, {}},
    {"SPARK_TOPOLOGY_CACHE", "path", "",
     "The file that keeps this machine's hwloc topology between launches (reloaded while the "
     "boot id, online CPUs, binding and hwloc are the same). 0: discover at every launch. "
     "Unset: sparkrun/topology-HOST.xml in XDG_CACHE_HOME, else in ~/.cache.",
     KnobType::path, KnobOrigin::user, 0, 0, {}},
    // --- programs sparkrun starts (tool paths) -----------------------------------------------
    {"SPARK_DOCTOR_PROBE", "path", "",
     "The rank-side program `sparkrun doctor LAUNCH-OPTIONS` runs on every rank. Unset: the "
     "build tree's spark_doctor_probe, else the one next to sparkrun.",
     KnobType::path, KnobOrigin::tool, 0, 0, {}},
    {"SPARK_FABRIC_DISCOVER", "path", "",
     "The program `sparkrun fabric` runs on each host to map the cables. Unset: the build "
     "tree's spark_fabric_discover, else the one next to sparkrun.",
     KnobType::path, KnobOrigin::tool, 0, 0, {}},
    // --- build and test scripts, test hooks (read by their script; listed so that they are
    // known names, not typos) --------------------------------------------------------------
    {"SPARK_BUILD_DIR", "path", "build", "Build folder of scripts/build and scripts/test.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_TEST_ROCE", "any", "",
     "Set: libspark's multi-process tests add roce to their transports (inside the Soft-RoCE "
     "VM, tests/rdma).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_VM_CACHE", "path", "/var/cache/sparkrun/vm",
     "Where tests/rdma keeps its VM images (docs/roce.md).", KnobType::unchecked,
     KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_GPU_BUILD_DIR", "path", "build-gpu", "Build folder of tests/gpu/run.sh.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_GPU_MIB", "integer", "256",
     "Buffer size (MiB) of tests/gpu/run.sh's bandwidth figure (docs/gpu.md).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_GPU_ALLOW_SKIP", "0|1", "0",
     "1: tests/gpu/run.sh builds and runs without a GPU (the gpu tests then skip).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_SLURM_NETNS_NODES", "integer", "2",
     "Network-namespace nodes of the test SLURM cluster (tests/slurm; 0 for none).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_SLURM_MAX_LIFETIME", "seconds", "900",
     "The test SLURM cluster's watchdog stops its daemons after this long.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_FUZZ_SECONDS", "seconds", "5", "How long each fuzz.* test runs its harness.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_FUZZ_CXX", "program", "clang++-14", "The compiler tests/fuzz builds the harnesses with.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_FUZZ_WRITE_SEEDS", "path", "",
     "A fuzz harness writes its seed corpus into this folder and exits (tests/fuzz).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_TEST_TORCH_BUILT", "0|1", "", "Set by ctest for tests/python: 1 when the torch "
     "backend is built.", KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_SLURM_TEST_MARK", "path", "",
     "Exported by tests/slurm into every job so that its processes can be found afterwards.",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_DOCTOR_TEST_SILENT_RANK", "integer", "",
     "Test hook of spark_doctor_probe: this rank never answers a round trip (docs/doctor.md).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    {"SPARK_DOCTOR_TEST_STOP_RANK", "integer", "",
     "Test hook of spark_doctor_probe: this rank SIGSTOPs itself (docs/doctor.md).",
     KnobType::unchecked, KnobOrigin::scripts, 0, 0, {}},
    // --- torchrun compatibility ----------------------------------------------------------------
    {"RANK", "integer", "", "torchrun's rank; used when SPARK_RANK is unset.", KnobType::integer,
     KnobOrigin::torchrun, 0, kMaxRanks - 1, {}},
    {"WORLD_SIZE", "integer", "", "torchrun's number of ranks; used when SPARK_SIZE is unset.",
     KnobType::integer, KnobOrigin::torchrun, 1, kMaxRanks, {}},
    {"LOCAL_RANK", "integer", "", "torchrun's local rank.", KnobType::integer,
     KnobOrigin::torchrun, 0, kMaxRanks - 1, {}},
    {"LOCAL_WORLD_SIZE", "integer", "", "torchrun's ranks per node.", KnobType::integer,
     KnobOrigin::torchrun, 1, kMaxRanks, {}},
    {"MASTER_ADDR", "host", "", "torchrun's rendezvous host; used when SPARK_RENDEZVOUS is unset.",
     KnobType::string, KnobOrigin::torchrun, 0, 0, {}},
    {"MASTER_PORT", "integer", "", "torchrun's rendezvous port.", KnobType::integer,
     KnobOrigin::torchrun, 1, 65535, {}},
    // --- removed -------------------------------------------------------------------------------
    {"SPARKNET_ROCE_SPIN_LIMIT", "refused", "",
     "Removed. It counted polls; it was replaced by SPARKNET_ROCE_TIMEOUT_MS in milliseconds. "
     "Setting it (even empty) is an error; do not copy its value over.",
     KnobType::refused, KnobOrigin::removed, 0, 0, {}},
    {"SPARKNET_ROCE_KERNELS", "refused", "",
     "Removed option. Setting it (even empty) is an error.", KnobType::refused,
     KnobOrigin::removed, 0, 0, {}},
};
// clang-format on

}  // namespace

std::span<const Knob> knobs() noexcept {
  return kKnobs;
}

const Knob* find_knob(std::string_view name) noexcept {
  auto it = std::find_if(std::begin(kKnobs), std::end(kKnobs),
                         [&](const Knob& k) { return k.name == name; });
  return it == std::end(kKnobs) ? nullptr : &*it;
}

}  // namespace spark::config
