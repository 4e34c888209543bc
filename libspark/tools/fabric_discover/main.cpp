// spark_fabric_discover: learns the fabric map of the nodes it runs on (one rank per node,
// started by sparkrun), prints it, and optionally writes it as a file to pin or checks it
// against a pinned file (docs/fabric.md).
//
//   sparkrun -n 3 --host a,b,c spark_fabric_discover [--write FILE] [--fabric FILE]
//
// Each rank publishes its lanes (SPARK_DATA_NET selects them) and a listening port per lane;
// the lower-ranked end of every same-subnet lane pair probes it with a tcp connection bound
// to its own lane; probe results are published too, so every rank builds the same map.
// Exit 0: map found (and matches the pinned file); 1: mismatch or failure (group abort).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <tuple>

#include "bootstrap/bootstrap.hpp"
#include "config/config.hpp"
#include "fabric/fabric_file.hpp"
#include "fabric/local_lanes.hpp"
#include "fabric/rdma_lanes.hpp"
#include "spark/error.hpp"

namespace {

using namespace spark;
using namespace spark::fabric;

std::string to_string(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
std::vector<std::byte> to_bytes(const std::string& s) {
  auto p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A listening socket on one lane's address (probes connect to it; the kernel completes the
// handshake from the backlog, so nobody has to accept()).
struct Listener {
  int fd = -1;
  int port = 0;
  explicit Listener(const Lane& l) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(l.ipv4);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw Error("fabric: cannot listen on lane " + l.name + " (" + format_ipv4(l.ipv4) +
                  "): " + std::strerror(errno));
    port = ntohs(a.sin_port);
  }
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
};

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
  auto boot = bootstrap::make_bootstrap(cfg);
  const int rank = boot->rank(), size = boot->size();
  const std::chrono::milliseconds timeout(cfg.timeout_ms());
  const char* nets_env = std::getenv("SPARK_DATA_NET");
  auto nets = parse_nets(nets_env ? nets_env : "", "SPARK_DATA_NET");
  // RoCE lanes are RDMA functions (rdma_lanes.hpp); auto uses them when the node has any.
  // The map is per host: SPARK_IB_HCA (the user's choice) restricts it, not SPARK_LANES (the
  // launcher's per-rank binding of this one discovery rank).
  const auto t = cfg.transport();
  const auto devs =
      cfg.ib_hca() ? parse_rdma_devices(*cfg.ib_hca(), "SPARK_IB_HCA") : std::vector<std::string>{};
  auto mine = node_lanes(t == config::Transport::roce          ? LaneKind::rdma
                         : t == config::Transport::auto_select ? LaneKind::automatic
                                                               : LaneKind::net,
                         devs, nets);
  std::vector<std::unique_ptr<Listener>> listeners;
  std::string ports;
  for (const auto& l : mine) {
    listeners.push_back(std::make_unique<Listener>(l));
    ports += (ports.empty() ? "" : ",") + std::to_string(listeners.back()->port);
  }
  boot->put("spark.fabric.lanes", to_bytes(encode_lanes(mine)));
  boot->put("spark.fabric.ports", to_bytes(ports));
  boot->put("spark.fabric.host", to_bytes(boot->node_id()));
  boot->commit();
  boot->fence(timeout);

  // One node per distinct host (first rank on it): jobs with several ranks per host work too.
  std::vector<std::vector<Lane>> lanes;
  std::vector<std::vector<int>> port_of;
  std::vector<std::string> hosts;
  std::vector<int> node_rank;  // the rank that speaks for each node
  int me = -1;                 // this rank's node index when it speaks for it
  for (int r = 0; r < size; ++r) {
    auto host = to_string(boot->get(r, "spark.fabric.host"));
    if (std::find(hosts.begin(), hosts.end(), host) != hosts.end()) continue;
    if (r == rank) me = static_cast<int>(hosts.size());
    hosts.push_back(host);
    node_rank.push_back(r);
    lanes.push_back(decode_lanes(to_string(boot->get(r, "spark.fabric.lanes"))));
    port_of.emplace_back();
    auto p = to_string(boot->get(r, "spark.fabric.ports"));
    for (std::size_t s = 0; !p.empty();) {
      auto c = p.find(',', s);
      port_of.back().push_back(std::stoi(p.substr(s, c == p.npos ? p.npos : c - s)));
      if (c == p.npos) break;
      s = c + 1;
    }
  }
  const int nodes = static_cast<int>(hosts.size());
  // Probe every same-subnet pair toward higher ranks; publish the ones that connected.
  std::string ok;
  for (int b = me < 0 ? nodes : me + 1; b < nodes; ++b)
    for (std::size_t i = 0; i < mine.size(); ++i)
      for (std::size_t j = 0; j < lanes[static_cast<std::size_t>(b)].size(); ++j) {
        const auto& lb = lanes[static_cast<std::size_t>(b)][j];
        if (same_subnet(mine[i], lb) &&
            probe_connect(mine[i], lb.ipv4, port_of[static_cast<std::size_t>(b)][j],
                          std::min(timeout, std::chrono::milliseconds(3000))))
          ok += std::to_string(b) + ":" + std::to_string(i) + ":" + std::to_string(j) + ";";
      }
  boot->put("spark.fabric.probe", to_bytes(ok));
  boot->commit();
  boot->fence(timeout);
  std::set<std::tuple<int, int, int, int>> works;
  for (int a = 0; a < nodes; ++a) {
    auto s = to_string(boot->get(node_rank[static_cast<std::size_t>(a)], "spark.fabric.probe"));
    for (std::size_t p = 0; p < s.size();) {
      int b = 0, i = 0, j = 0;
      if (std::sscanf(s.c_str() + p, "%d:%d:%d;", &b, &i, &j) != 3) break;
      works.insert({a, i, b, j});
      p = s.find(';', p) + 1;
    }
  }
  auto map = build_map(lanes, [&](int a, int i, int b, int j) {
    return works.count({a, i, b, j}) > 0;
  });
  auto found = from_map(hosts, lanes, map);
  if (rank == 0) {
    std::cout << "fabric map (" << nodes << " nodes, "
              << (map.fully_connected() ? "every pair cabled: direct" : "relay needed") << "):\n"
              << map.describe(hosts, lanes) << std::flush;
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
