// What a communicator takes from the configuration snapshot: filled by from_config, read by
// the communicator and by each transport's factory (transport/registry.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spark/protocol/cpu_isa.hpp"

namespace spark {

namespace config {
class Config;
}

struct CommOptions {
  std::uint32_t timeout_ms = 10000;           ///< SPARKNET_ROCE_TIMEOUT_MS
  std::uint32_t barrier_timeout_ms = 600000;  ///< SPARK_BARRIER_TIMEOUT_MS
  std::uint32_t join_timeout_ms = 60000;      ///< SPARK_JOIN_TIMEOUT_MS (transport wire-up)
  std::uint32_t spin_us = 5;  ///< SPARK_SPIN_US (when !spin_auto: every wait spins this long)
  bool spin_auto = false;     ///< SPARK_SPIN_US unset: the adaptive wait policy decides
  /// SPARK_MAX_CPU_ISA: the widest level the folds may use (auto: coll::kWidestCpuIsa)
  coll::CpuIsa max_cpu_isa = coll::kWidestCpuIsa;
  std::string transport = "auto";  ///< SPARK_TRANSPORT: auto or a name of transport/registry.hpp
  int tcp_lanes = 2;
  std::optional<std::string> tcp_addr;
  /// SPARK_TCP_PORT_RANGE: the ports the data plane's listeners may take (0, 0: ephemeral).
  std::pair<int, int> tcp_ports{0, 0};
  std::string data_net;  ///< SPARK_DATA_NET: interfaces that are data lanes (docs/fabric.md)
  std::optional<std::string> ib_hca;      ///< SPARK_IB_HCA
  std::optional<int> ib_gid_index;        ///< SPARK_IB_GID_INDEX
  std::optional<std::string> rdma_lanes;  ///< SPARK_LANES (sparkrun's binding plan)
  std::string job_id;                     ///< names shm segments ("" = none given)
  /// Fail-stop policy: report a failure to the launcher via Bootstrap::abort (the group is
  /// then stopped). Tests of the library alone turn it off.
  bool report_failures = true;
  std::size_t shm_slot_bytes = 256 * 1024;
  bool shm_cma = true;  ///< SPARK_SHM_CMA: cross-memory attach to the node's peers (single copy)
  bool shm_membarrier = true;  ///< SPARK_SHM_MEMBARRIER: the sleeper pays the wake-up fence
  bool shm_ptracer = true;     ///< SPARK_SHM_PTRACER=parent: declare the parent under Yama scope 1
  /// tcp: 32 slots of 64 KiB (the same 2 MiB per connection as 8 of 256 KiB). Pieces that
  /// small stay in cache between the kernel's copy and the fold: 2 ranks over loopback, 16 MiB
  /// 6.8-7.0 ms vs 8.2-9.5 with 256 KiB pieces (2 Dec 16:50 UTC). Taken back once for a flaky
  /// fabric.netns.ring, whose cause was a wait failing on another connection's close
  /// (TcpTransport::wait_state, docs/status.md eleventh session).
  std::size_t tcp_slot_bytes = 64 * 1024;
  std::size_t tcp_slots = 32;
  std::size_t roce_slot_bytes = 256 * 1024;
  std::size_t slots = 8;                  ///< shm and roce
  std::optional<std::string> trace_path;  ///< SPARK_TRACE
  std::uint32_t flight_ops = 64;          ///< SPARK_FLIGHT_RECORDER (0: off)
  /// SPARK_RANK: the launcher's rank of this process, which names its flight recorder (a
  /// communicator made over a caller's store may have another rank in its own group).
  std::optional<int> launcher_rank;
  /// The knob rows of scope job (config.hpp, KnobScope) as NAME, value ("" = unset), in table
  /// order: what the wire-up compares across ranks (comm/settings_digest.hpp).
  std::vector<std::pair<std::string, std::string>> job_settings;

  static CommOptions from_config(const config::Config& config);
};

}  // namespace spark
