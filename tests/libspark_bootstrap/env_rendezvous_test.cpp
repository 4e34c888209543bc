// The environment rendezvous with real processes on loopback: put/fence/get, local ranks from
// node ids, join timeouts naming the missing ranks, dead ranks, refusals, abort.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/env_bootstrap.hpp"
#include "bootstrap/node_layout.hpp"
#include "multiproc.hpp"
#include "spark/error.hpp"

namespace {

using namespace std::chrono_literals;
using spark::bootstrap::as_bytes;
using spark::bootstrap::make_bootstrap;
using spark::config::Config;
using spark::test::free_port;
using spark::test::run_ranks;

std::map<std::string, std::string> env_for(int rank, int size, std::uint16_t port,
                                           int join_timeout_ms = 20000) {
  return {{"SPARK_RANK", std::to_string(rank)},
          {"SPARK_SIZE", std::to_string(size)},
          {"SPARK_RENDEZVOUS", "127.0.0.1:" + std::to_string(port)},
          {"SPARK_JOIN_TIMEOUT_MS", std::to_string(join_timeout_ms)}};
}

TEST(NodeLayout, DerivedFromNodeIds) {
  const std::vector<std::string> ids{"b", "a", "b", "c", "a"};
  auto l = spark::bootstrap::derive_layout(ids, 2);
  EXPECT_EQ(l.node_rank, 0);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
  l = spark::bootstrap::derive_layout(ids, 4);
  EXPECT_EQ(l.node_rank, 1);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
  l = spark::bootstrap::derive_layout(ids, 3);
  EXPECT_EQ(l.node_rank, 2);
  EXPECT_EQ(l.local_rank, 0);
  EXPECT_EQ(l.local_size, 1);
}

TEST(NodeLayout, RanksOfOtherHostsOnTheSameKernelShareItsCpus) {
  // Three one-rank "hosts" in network namespaces of one machine, a fourth rank elsewhere, and a
  // rank whose machine id could not be read (on its node's machine: its node's rank 0's).
  const std::vector<std::string> nodes{"ns1", "ns2", "ns3", "far", "ns1"};
  const std::vector<std::string> machines{"boot-a", "boot-a", "boot-a", "boot-b", ""};
  using spark::bootstrap::ranks_sharing_machine;
  EXPECT_EQ(ranks_sharing_machine(machines, nodes, 1), 4);  // ns1's two ranks, ns2, ns3
  EXPECT_EQ(ranks_sharing_machine(machines, nodes, 3), 1);
  EXPECT_EQ(ranks_sharing_machine(machines, nodes, 4), 4);  // its node's rank 0 is on boot-a
  EXPECT_EQ(ranks_sharing_machine({"", "", ""}, {"a", "b", "a"}, 0), 2);
}

TEST(NodeLayout, MachineIdIsTheKernelsBootId) {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string expected;
  if (!std::getline(file, expected)) GTEST_SKIP() << "/proc/sys/kernel/random/boot_id unreadable";
  const std::string id = spark::bootstrap::local_machine_id();
  EXPECT_EQ(id, expected);
  EXPECT_EQ(id.size(), 36u) << id;  // a UUID, no newline
}

TEST(EnvRendezvous, PutFenceGetAcrossThreeRanks) {
  const auto port = free_port();
  const auto results = run_ranks({0, 1, 2}, [&](int rank, std::string& report) {
    auto env = env_for(rank, 3, port);
    env["SPARK_HOST"] = rank == 1 ? "nodeB" : "nodeA";  // ranks 0 and 2 share a node
    auto boot = make_bootstrap(Config::from_map(env));
    boot->put("ep", as_bytes("endpoint-of-" + std::to_string(rank)));
    boot->commit();
    boot->fence(20s);
    report = std::string(boot->kind()) + " " + std::to_string(boot->rank()) + "/" +
             std::to_string(boot->size()) + " local " + std::to_string(boot->local_rank()) + "/" +
             std::to_string(boot->local_size()) + " node " + std::to_string(boot->node_rank()) +
             " " + boot->node_id() + ":";
    for (int r = 0; r < 3; ++r) report += " " + spark::bootstrap::to_string(boot->get(r, "ep"));
    // A second round reuses the same store.
    boot->put("round2", as_bytes(std::to_string(rank * 10)));
    boot->commit();
    boot->fence(20s);
    report += " " + spark::bootstrap::to_string(boot->get((rank + 1) % 3, "round2"));
    return 0;
  });
  ASSERT_EQ(results.size(), 3u);
  const char* expected[] = {
      "env 0/3 local 0/2 node 0 nodeA: endpoint-of-0 endpoint-of-1 endpoint-of-2 10",
      "env 1/3 local 0/1 node 1 nodeB: endpoint-of-0 endpoint-of-1 endpoint-of-2 20",
      "env 2/3 local 1/2 node 0 nodeA: endpoint-of-0 endpoint-of-1 endpoint-of-2 0"};
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << results[r].report;
    EXPECT_EQ(results[r].report, expected[r]);
  }
}

TEST(EnvRendezvous, TorchrunVariables) {
  const auto port = free_port();
  const auto results = run_ranks({0, 1}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map({{"RANK", std::to_string(rank)},
                                                 {"WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "localhost"},
                                                 {"MASTER_PORT", std::to_string(port)}}));
    report = std::string(boot->kind()) + " " + std::to_string(boot->rank()) + "/" +
             std::to_string(boot->size()) + " local " + std::to_string(boot->local_rank()) + "/" +
             std::to_string(boot->local_size());
    return 0;
  });
  EXPECT_EQ(results[0].report, "env 0/2 local 0/2");
  EXPECT_EQ(results[1].report, "env 1/2 local 1/2");
}

TEST(EnvRendezvous, JoinTimeoutNamesTheRanksThatNeverArrived) {
  const auto port = free_port();
  // Rank 1 and 3 of 4 are never started.
  const auto start = std::chrono::steady_clock::now();
  const auto results = run_ranks({0, 2}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 4, port, 1500)));
    report = "joined";
    return 0;
  });
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 99);
    EXPECT_NE(r.report.find("ranks 1, 3 did not reach fence 1 within 1500 ms; never connected: "
                            "1, 3"),
              std::string::npos)
        << r.report;
  }
  EXPECT_LT(elapsed, 15s);  // generous: the deadline is 1.5 s
}

TEST(EnvRendezvous, MissingRankZeroIsReportedWithTheAddress) {
  const auto port = free_port();
  const auto results = run_ranks({1}, [&](int rank, std::string&) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 2, port, 800)));
    return 0;
  });
  EXPECT_EQ(results[0].exit_code, 99);
  EXPECT_NE(results[0].report.find(
                "env rendezvous: could not connect to rank 0 at 127.0.0.1:" + std::to_string(port) +
                " within 800 ms (SPARK_JOIN_TIMEOUT_MS); last error: "),
            std::string::npos)
      << results[0].report;
}

TEST(EnvRendezvous, ARankThatDiesFailsTheFenceAtOnce) {
  const auto port = free_port();
  const auto results = run_ranks({0, 1, 2}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 3, port)));
    if (rank == 2) _exit(7);  // dies after joining, before the next fence
    const auto t0 = std::chrono::steady_clock::now();
    try {
      boot->fence(30s);
      report = "fence completed";
    } catch (const spark::BootstrapError& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      report = std::string(e.what()) + (ms < 10000 ? " [fast]" : " [slow]");
    }
    return 0;
  });
  EXPECT_EQ(results[2].exit_code, 7);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].report,
              "env rendezvous at 127.0.0.1:" + std::to_string(port) + ": rank " +
                  std::to_string(r) +
                  ": fence 2 cannot complete: rank 2 left the rendezvous before reaching it "
                  "(exited or crashed) [fast]");
  }
}

TEST(EnvRendezvous, ARankInAFenceWhenRankZeroLeavesGetsAClearAnswer) {
  const auto port = free_port();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const auto results = run_ranks({0, 1}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 2, port)));
    if (rank == 1) {
      const char byte = 1;
      (void)!write(ready[1], &byte, 1);
      try {
        boot->fence(30s);
        report = "fence completed";
      } catch (const spark::BootstrapError& e) {
        report = e.what();
      }
      return 0;
    }
    char byte = 0;
    (void)!read(ready[0], &byte, 1);
    std::this_thread::sleep_for(200ms);  // rank 1 is in its fence by now
    const auto t0 = std::chrono::steady_clock::now();
    boot.reset();  // rank 0 leaves without the fence; its store must still answer rank 1
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    report = ms < 10000 ? "left" : "waited " + std::to_string(ms) + " ms";
    return 0;
  });
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(results[0].report, "left");
  EXPECT_EQ(results[1].report, "env rendezvous at 127.0.0.1:" + std::to_string(port) +
                                   ": rank 1: fence 2 cannot complete: rank 0 left the "
                                   "rendezvous before reaching it (exited or crashed)");
}

TEST(EnvRendezvous, RankZeroDoesNotWaitForAnIdleRank) {
  // An idle rank (here: sleeping; in real life perhaps SIGSTOPped) must not hold rank 0's exit
  // for the whole join timeout: without rank 0 it cannot complete any later fence anyway.
  const auto port = free_port();
  const auto results = run_ranks({0, 1}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 2, port, 30000)));
    if (rank == 1) {
      std::this_thread::sleep_for(3s);
      boot.reset();  // its goodbye finds nobody listening: silently fine
      report = "left late";
      return 0;
    }
    const auto t0 = std::chrono::steady_clock::now();
    boot.reset();
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    report = ms < 2500 ? "left" : "waited " + std::to_string(ms) + " ms";
    return 0;
  });
  EXPECT_EQ(results[0].report, "left");
  EXPECT_EQ(results[1].report, "left late");
  EXPECT_EQ(results[1].exit_code, 0);
}

TEST(EnvRendezvous, SizeMismatchAndDuplicateRanksAreRefused) {
  const auto port = free_port();
  const auto results = run_ranks({0, 1}, [&](int rank, std::string&) {
    auto env = env_for(rank, rank == 0 ? 2 : 3, port, 1500);
    auto boot = make_bootstrap(Config::from_map(env));
    return 0;
  });
  EXPECT_EQ(results[1].exit_code, 99);
  EXPECT_EQ(results[1].report,
            "exception: env rendezvous at 127.0.0.1:" + std::to_string(port) +
                ": rank 1 was started with a job size of 3 but rank 0 serves a job of size 2: "
                "give every rank the same SPARK_SIZE (or WORLD_SIZE)");
  EXPECT_EQ(results[0].exit_code, 99);  // its join fence then times out

  const auto port2 = free_port();
  const auto dup = run_ranks({0, 1, 1}, [&](int rank, std::string&) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 3, port2, 1500)));
    return 0;
  });
  int refused = 0;
  for (const auto& r : dup) {
    if (r.report.find("rank 1 joined the rendezvous twice: two processes were started with the "
                      "same rank") != std::string::npos) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1);
}

TEST(EnvRendezvous, AbortTellsTheStoreAndExitsWithTheStatus) {
  const auto port = free_port();
  const auto results = run_ranks({0, 1}, [&](int rank, std::string& report) {
    auto boot = make_bootstrap(Config::from_map(env_for(rank, 2, port)));
    if (rank == 1) {
      boot->abort(3,
                  "rank 1: allreduce seq 7 step 0: no data from rank 0 on lane tcp:0 after "
                  "300 ms (timeout 300 ms)");
    }
    try {
      boot->fence(30s);
      report = "fence completed";
    } catch (const spark::BootstrapError& e) {
      report = e.what();
    }
    return 0;
  });
  EXPECT_EQ(results[1].exit_code, 3);
  EXPECT_EQ(results[0].report,
            "env rendezvous at 127.0.0.1:" + std::to_string(port) +
                ": rank 0: rank 1 aborted the job (status 3): rank 1: allreduce seq 7 step 0: no "
                "data from rank 0 on lane tcp:0 after 300 ms (timeout 300 ms)");
}

std::string config_refusal(const std::map<std::string, std::string>& env) {
  try {
    auto boot = make_bootstrap(Config::from_map(env));
  } catch (const spark::Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Bootstrap, SelectionAndEnvRefusals) {
  {
    auto boot = make_bootstrap(Config::from_map({}));
    EXPECT_EQ(boot->kind(), "singleton");
    EXPECT_EQ(boot->size(), 1);
    boot->put("k", as_bytes("v"));
    boot->commit();
    boot->fence(1s);
    EXPECT_EQ(spark::bootstrap::to_string(boot->get(0, "k")), "v");
    EXPECT_THROW((void)boot->get(0, "missing"), spark::BootstrapError);
    EXPECT_THROW((void)boot->get(1, "k"), spark::InvalidUsage);
  }
  {
    auto boot = make_bootstrap(Config::from_map({{"SPARK_RANK", "0"}, {"SPARK_SIZE", "1"}}));
    EXPECT_EQ(boot->kind(), "env");
    EXPECT_EQ(boot->size(), 1);
    EXPECT_EQ(boot->node_id(), boot->node_id());
  }
  {
    auto boot = make_bootstrap(Config::from_map(
        {{"SPARK_RANK", "0"}, {"SPARK_SIZE", "3"}, {"SPARK_BOOTSTRAP", "singleton"}}));
    EXPECT_EQ(boot->kind(), "singleton");
  }
  EXPECT_EQ(config_refusal({{"SPARK_RANK", "1"}, {"SPARK_SIZE", "3"}}),
            "rank 1 of 3 has no rendezvous address: set SPARK_RENDEZVOUS=HOST:PORT (rank 0's "
            "host and a free port; rank 0 listens there) or MASTER_ADDR and MASTER_PORT");
  EXPECT_EQ(config_refusal({{"RANK", "1"}}),
            "RANK is set but WORLD_SIZE is not: torchrun-style launches need both RANK and "
            "WORLD_SIZE (or use SPARK_RANK and SPARK_SIZE)");
  EXPECT_EQ(config_refusal({{"SPARK_BOOTSTRAP", "env"}}),
            "SPARK_BOOTSTRAP=env needs SPARK_RANK and SPARK_SIZE (or RANK and WORLD_SIZE), plus "
            "SPARK_RENDEZVOUS=HOST:PORT (or MASTER_ADDR and MASTER_PORT) when there is more than "
            "one rank");
  if (!spark::bootstrap::pmix_available()) {
    EXPECT_EQ(config_refusal({{"SPARK_BOOTSTRAP", "pmix"}}),
              "PMIx bootstrap requested but libspark was built without PMIx: install "
              "libpmix-dev and rebuild with -DSPARK_ENABLE_PMIX=ON");
  }
}

TEST(Bootstrap, RankZeroReportsABusyPort) {
  // Hold the port so that rank 0 cannot listen on it.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto port = ntohs(addr.sin_port);
  const auto text = config_refusal(env_for(0, 2, port, 1000));
  close(fd);
  EXPECT_NE(
      text.find("env rendezvous: rank 0 cannot listen on port " + std::to_string(port) + ": "),
      std::string::npos)
      << text;
}

}  // namespace
