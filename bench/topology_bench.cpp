// How long sparkrun's binding decision costs: topology load + machine_info + plan, per mode.
//   topology_bench [--iterations N] [--xml FILE] [--no-io]
// Prints min / median / max milliseconds. Each iteration loads a fresh topology, as one
// sparkrun start does (the first iteration also pays hwloc's plugin loading: see "first").
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "spark/topo/plan.hpp"

int main(int argc, char** argv) {
  spark::topo::LoadOptions load;
  int iterations = 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = std::stoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--xml") && i + 1 < argc) {
      load.xml_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-io")) {
      load.with_io = false;
    } else {
      std::fprintf(stderr, "usage: topology_bench [--iterations N] [--xml FILE] [--no-io]\n");
      return 2;
    }
  }
  std::vector<double> ms;
  std::size_t lanes = 0;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto topo = spark::topo::Topology::load(load);
    auto machine = spark::topo::machine_info(topo);
    spark::topo::PlanOptions options;
    options.local_ranks = 3;
    auto plan = spark::topo::make_plan(machine, options);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    lanes = machine.lanes.size();
    if (plan.ranks.size() != 3) return 1;
  }
  double first = ms.front();
  std::sort(ms.begin(), ms.end());
  std::printf(
      "%s%s: load+plan(3 ranks) first %.2f ms, min %.2f, median %.2f, max %.2f ms (%d runs, %zu "
      "lanes)\n",
      load.xml_path ? load.xml_path->c_str() : "live", load.with_io ? " with I/O" : " no I/O",
      first, ms.front(), ms[ms.size() / 2], ms.back(), iterations, lanes);
  return 0;
}
