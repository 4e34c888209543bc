// spark_fabric_discover: learns the fabric map of the nodes it runs on (one rank per node,
// started by sparkrun), prints it, and optionally writes it as a file to pin or checks it
// against a pinned file (docs/fabric.md).
//
//   sparkrun -n 3 --host a,b,c spark_fabric_discover [--write FILE] [--fabric FILE]
//
// Each rank publishes its lanes (SPARK_DATA_NET selects them) and a listening port per lane;
// the lower-ranked end of every same-subnet lane pair probes it with a tcp connection bound
// to its own lane that carries the job's token and is answered (fabric/probe_protocol.hpp);
// probe results are published too, so every rank builds the same map.
// Exit 0: map found (and matches the pinned file); 1: mismatch or failure (group abort).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/job_token.hpp"
#include "fabric/fabric_file.hpp"
#include "fabric/local_lanes.hpp"
#include "fabric/probe_protocol.hpp"
#include "fabric/rdma_lanes.hpp"
#include "fabric/roce_lanes.hpp"
#include "log/log.hpp"
#include "net/socket.hpp"
#include "spark/config/config.hpp"
#include "spark/error.hpp"

namespace {

using namespace spark;
using namespace spark::fabric;

using bootstrap::as_bytes;
using bootstrap::to_string;

int run(int argc, char** argv) {
  std::string write_path, pin_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--write" || a == "--fabric") && i + 1 < argc)
      (a == "--write" ? write_path : pin_path) = argv[++i];
    else {
      std::cerr << "usage: spark_fabric_discover [--write FILE] [--fabric FILE]\n";
      return 2;
    }
  }
  auto cfg = config::Config::from_environment();
  log::configure(cfg);
  auto boot = bootstrap::make_bootstrap(cfg);
  const int rank = boot->rank(), size = boot->size();
  log::set_host(boot->node_id());
  log::set_rank(rank);
  const std::chrono::milliseconds timeout(cfg.timeout_ms());
  auto nets = parse_nets(cfg.value("SPARK_DATA_NET").value_or(""), "SPARK_DATA_NET");
  // RoCE lanes are RDMA functions (rdma_lanes.hpp); auto uses them when the node has any.
  // The map is per host: SPARK_IB_HCA (the user's choice) restricts it, not SPARK_LANES (the
  // launcher's per-rank binding of this one discovery rank).
  const auto t = cfg.transport();
  const auto devs = cfg.value("SPARK_IB_HCA")
                        ? parse_rdma_devices(*cfg.value("SPARK_IB_HCA"), "SPARK_IB_HCA")
                        : std::vector<std::string>{};
  auto mine = node_lanes(t == "roce"   ? LaneKind::rdma
                         : t == "auto" ? LaneKind::automatic
                                       : LaneKind::net,
                         devs, nets);
  // Probes connect to these and are answered by the node's speaker (ProbeAnswerer).
  std::vector<net::Listener> listeners;
  std::vector<int> ports;
  const auto [first_port, last_port] = CommOptions::from_config(cfg).tcp_ports;
  for (const auto& l : mine) {
    listeners.emplace_back(l.ipv4, "lane " + l.name, 0, 64, net::PortRange{first_port, last_port});
    ports.push_back(listeners.back().port());
  }
  boot->put("spark.fabric.lanes", as_bytes(encode_lanes(mine)));
  boot->put("spark.fabric.ports", as_bytes(encode_ports(ports)));
  boot->put("spark.fabric.host", as_bytes(boot->node_id()));
  bootstrap::publish_job_token(*boot);
  boot->commit();
  boot->fence(timeout);

  // One node per distinct host (first rank on it): jobs with several ranks per host work too.
  std::vector<std::string> host_of(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    host_of[static_cast<std::size_t>(r)] = to_string(boot->get(r, "spark.fabric.host"));
  const Nodes nodes = group_by_host(host_of);
  const auto& hosts = nodes.hosts;
  std::vector<std::vector<Lane>> lanes;
  std::vector<std::vector<int>> port_of;
  for (int r : nodes.speaker) {
    lanes.push_back(decode_lanes(to_string(boot->get(r, "spark.fabric.lanes"))));
    port_of.push_back(
        decode_ports(to_string(boot->get(r, "spark.fabric.ports")), "rank " + std::to_string(r)));
  }
  const int me = nodes.node_of[static_cast<std::size_t>(rank)];
  const bool speaker = nodes.speaker[static_cast<std::size_t>(me)] == rank;
  const auto token = bootstrap::job_token(*boot);
  {
    // Answered until every node has probed (the fence).
    std::optional<ProbeAnswerer> answerer;
    if (speaker) {
      std::vector<int> fds;
      for (const auto& l : listeners) fds.push_back(l.fd());
      answerer.emplace(std::move(fds), token, static_cast<int>(hosts.size()), me);
    }
    boot->put("spark.fabric.probe",
              as_bytes(speaker ? probe_higher(
                                     lanes, me,
                                     [&](int b, std::size_t j) {
                                       return port_of[static_cast<std::size_t>(b)][j];
                                     },
                                     timeout, token)
                               : std::string()));
    boot->commit();
    boot->fence(timeout);
  }
  std::vector<std::string> published;
  for (int r : nodes.speaker) published.push_back(to_string(boot->get(r, "spark.fabric.probe")));
  auto map = map_from_probes(lanes, published);
  auto found = from_map(hosts, lanes, map);
  if (rank == 0) {
    std::cout << "fabric map (" << hosts.size() << " nodes, "
              << (map.fully_connected() ? "every pair cabled: direct" : "relay needed") << "):\n"
              << map.describe(hosts, lanes) << std::flush;
    // RDMA lanes: the per-peer lane pairs a job with SPARK_TRANSPORT=auto|roce uses (the
    // same choice, fabric/roce_lanes.hpp; the job then probes each pair with an RDMA WRITE).
    const bool rdma =
        t == "roce" ||
        (t == "auto" && !rdma_functions(kSysfsInfinibandClass, netdev_addresses()).empty());
    if (rdma) {
      std::cout << "roce lanes per peer:\n";
      const int n = static_cast<int>(hosts.size());
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (a != b)
            std::cout << describe_roce_peer(choose_roce_peer(map, lanes, hosts, a, b, {}, {}),
                                            lanes, hosts, a, b)
                      << "\n";
    }
    if (!write_path.empty()) {
      std::ofstream(write_path) << to_json(found);
      std::cout << "wrote " << write_path << "\n";
    }
  }
  if (!pin_path.empty()) {
    auto diff = compare(load_fabric_file(pin_path), found);
    if (!diff.empty()) {
      if (rank == 0) {
        std::cerr << diff << std::flush;
        boot->abort(1, "rank 0: fabric map differs from the pinned file " + pin_path +
                           "; refusing to start (see both maps above)");
      }
      boot->fence(timeout);  // rank 0 aborts the group
      return 1;
    }
    if (rank == 0) std::cout << "fabric map matches " << pin_path << "\n";
  }
  boot->fence(timeout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "spark_fabric_discover: " << e.what() << "\n";
    return 1;
  }
}
