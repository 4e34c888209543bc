// The variables sparkrun (and each node daemon) gives every rank, which libspark's knob table
// reads: one spelling for both sides. docs/configuration.md documents them.
#pragma once

namespace spark::protocol::rank_env {

inline constexpr const char* kRank = "SPARK_RANK";             // 0..size-1
inline constexpr const char* kSize = "SPARK_SIZE";             // ranks in the job
inline constexpr const char* kLocalRank = "SPARK_LOCAL_RANK";  // 0..local size-1 on the node
inline constexpr const char* kLocalSize = "SPARK_LOCAL_SIZE";  // ranks on this node
inline constexpr const char* kNodeRank = "SPARK_NODE_RANK";    // the node's index in the job
inline constexpr const char* kJobId = "SPARK_JOB_ID";          // names shm segments, traces
inline constexpr const char* kHost = "SPARK_HOST";             // node identity (never hostname)
inline constexpr const char* kCpuset = "SPARK_CPUSET";         // cores the rank is bound to
inline constexpr const char* kLanes = "SPARK_LANES";           // the rank's NIC lanes
inline constexpr const char* kRestartCount = "SPARK_RESTART_COUNT";  // 0, then 1 per restart
inline constexpr const char* kJobDir = "SPARK_JOB_DIR";  // the node's job dir (sparkrun's)
// The libspark Python package registers faulthandler on SIGRTMIN + this, writing the Python
// frames to <SPARK_JOB_DIR>/pystacks.r<rank>; sparkrun sends it when it collects stacks.
inline constexpr int kPyStacksSignalOffset = 5;

}  // namespace spark::protocol::rank_env
