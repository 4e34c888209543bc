// Node identity and the local-rank layout derived from every rank's node id.
#pragma once

#include <string>
#include <vector>

#include "spark/config/config.hpp"

namespace spark::bootstrap {

struct NodeLayout {
  int node_rank = 0;   ///< index of this rank's node, nodes numbered by their lowest rank
  int local_rank = 0;  ///< position among the ranks with the same node id
  int local_size = 1;
};

/// The bootstrap key under which every rank publishes its node id for derive_layout (the
/// bootstraps without a launcher's layout: environment and store rendezvous).
inline constexpr const char* kNodeIdKey = "spark.node_id";

/// node_ids[r] is rank r's node id.
NodeLayout derive_layout(const std::vector<std::string>& node_ids, int rank);

/// The bootstrap key under which every rank publishes local_machine_id() (comm/wireup.cpp).
inline constexpr const char* kMachineIdKey = "spark.machine";

/// The running kernel's boot id (/proc/sys/kernel/random/boot_id); empty when unreadable. Not
/// namespaced: every network namespace and container of one machine reads the same, so ranks
/// of different "hosts" (SPARK_HOST, netns, containers) can tell that they share its CPUs.
std::string local_machine_id();

/// How many of the job's ranks run on the CPUs of rank `rank`'s machine: its node's ranks and
/// every rank with the same machine id (machine_ids[r] = node_ids[r]'s, the same size; an
/// empty id, unreadable, stands for the id of another rank of its node). The wait policy prices
/// spinning by it: three one-rank "hosts" in network namespaces of a 2-CPU machine oversubscribe it
/// as surely as three ranks of one host do.
int ranks_sharing_machine(const std::vector<std::string>& machine_ids,
                          const std::vector<std::string>& node_ids, int rank);

/// SPARK_HOST when set (the launcher's node name: namespaces share hostnames), else hostname.
std::string local_node_id(const config::Config& config);

}  // namespace spark::bootstrap
