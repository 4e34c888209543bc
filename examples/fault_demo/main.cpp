// A short job in which one rank vanishes, to see what fail-stop looks like:
//   sparkrun -n 3 fault_demo --kill-rank 2 --after 5            # rank 2 is killed (SIGKILL)
//   sparkrun -n 3 fault_demo --kill-rank 2 --after 5 --how stop  # rank 2 freezes (SIGSTOP)
// Every rank runs --steps allreduces of --count floats and checks each result. Rank R sends
// itself the signal before step N. See docs/examples/fault_demo.md for the report you get.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <spark/spark.hpp>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{
      "One rank vanishes mid-job; shows the fail-stop report (docs/examples/fault_demo.md)"};
  int kill_rank = -1;
  int after = 5, steps = 20, delay_ms = 100;
  std::size_t count = 1 << 16;
  std::string how = "kill";
  app.add_option("--kill-rank", kill_rank, "rank that vanishes (-1: none)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 1 << 20));
  app.add_option("--after", after, "steps completed before it vanishes")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  app.add_option(
         "--how", how,
         "kill: SIGKILL (the process is gone); stop: SIGSTOP (it hangs, the others time out)")
      ->capture_default_str()
      ->check(CLI::IsMember({"kill", "stop"}));
  app.add_option("--steps", steps, "allreduce steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--count", count, "floats per allreduce")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 26));
  app.add_option("--delay-ms", delay_ms, "pause between steps (work)")
      ->capture_default_str()
      ->check(CLI::Range(0, 60000));
  CLI11_PARSE(app, argc, argv);
  try {
    auto comm = spark::init();
    if (kill_rank >= comm.size())
      throw std::invalid_argument("--kill-rank " + std::to_string(kill_rank) + " but the job has " +
                                  std::to_string(comm.size()) + " ranks");
    comm.barrier();
    std::vector<float> buf(count);
    const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    for (int step = 0; step < steps; ++step) {
      if (comm.rank() == kill_rank && step == after) {
        std::fprintf(stderr, "fault_demo: rank %d: sending myself SIG%s before step %d\n",
                     kill_rank, how == "kill" ? "KILL" : "STOP", step);
        ::raise(how == "kill" ? SIGKILL : SIGSTOP);
      }
      std::fill(buf.begin(), buf.end(), static_cast<float>(comm.rank() + 1));
      comm.allreduce(buf.data(), buf.data(), count, spark::DType::f32, spark::ReduceOp::sum);
      for (float v : buf)
        if (v != want) {
          std::fprintf(stderr, "fault_demo: rank %d: WRONG DATA at step %d\n", comm.rank(), step);
          return 3;
        }
      if (comm.rank() == 0) std::printf("step %d: allreduce of %zu floats ok\n", step, count);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    if (comm.rank() == 0) std::printf("fault_demo: all %d steps done\n", steps);
    return 0;
  } catch (const spark::CommFailure& e) {
    // Usually not reached: libspark aborts the group with the record first (fail-stop).
    std::fprintf(stderr, "fault_demo: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_demo: error: %s\n", e.what());
    return 1;
  }
}
