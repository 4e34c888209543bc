// The transports this libspark can use (Gloo: one factory per transport), made from the list
// in spark/protocol/transports.hpp. Wire-up (comm/wireup.cpp) creates, publishes and connects
// transports only through this table and the Transport interface, and SPARK_TRANSPORT's
// choices and help text (config/src/knobs.cpp) come from the same list: a new transport is its
// folder (a Transport and its make_<name>) and one line there.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spark/protocol/transports.hpp"  // SPARK_TRANSPORTS: the list, one line each
#include "transport/transport.hpp"

namespace spark::transport {

struct TransportKind {
  std::string_view name;
  bool node_local;
  /// Opens the transport for setup.peers (listening sockets, segments, QPs); throws
  /// ConfigError when this libspark was built without it.
  std::unique_ptr<Transport> (*make)(const Setup& setup);
};

/// Every transport, in set-up order.
std::span<const TransportKind> transport_kinds() noexcept;

/// The transport that reaches a peer: SPARK_TRANSPORT's choice (`wanted`), or for auto shm on
/// the same node and tcp across nodes (the caller refuses a node-local one across nodes).
const TransportKind& choose_transport(std::string_view wanted, bool same_node);

/// Before the wire-up's first fence: what the per-peer choice needs every rank to know (roce:
/// each node's RDMA lanes, each rank's SPARK_LANES; transport/verbs/roce_choice.hpp). The
/// caller commits. `several_nodes`: the node layout says the job spans nodes.
void publish_choice_facts(bootstrap::Bootstrap& boot, const CommOptions& options,
                          bool several_nodes);

/// Every peer's transport (nullptr for this rank). With auto across nodes: roce to a peer the
/// fabric map's RDMA lanes reach (directly or through one relay), else tcp; `notes` gets one
/// line per node pair on tcp with the reason (rank 0 prints them once per job), `report` one
/// line per peer: its transport and lanes (printed with SPARK_LOG=info:wireup).
std::vector<const TransportKind*> choose_transports(const Setup& base,
                                                    std::vector<std::string>* notes,
                                                    std::vector<std::string>* report);

/// With auto, some pair was given roce (the same answer on every rank): a peer can then turn
/// out unreachable at the RDMA WRITE probe (Transport::unreachable), and the wire-up takes one
/// more fence to learn every rank's such peers and reach them over tcp.
bool may_fall_back(const Setup& base);

}  // namespace spark::transport
