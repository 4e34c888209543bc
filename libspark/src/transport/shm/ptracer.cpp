#include "transport/shm/ptracer.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "log/log.hpp"

namespace spark::transport {

PtracerPlan plan_ptracer(std::optional<int> yama_scope, bool cross_memory, bool declare_parent,
                         int parent_pid) {
  PtracerPlan plan;
  if (!yama_scope) return plan;  // no Yama: the usual same-user rule, nothing to declare
  const std::string scope = "Yama ptrace_scope " + std::to_string(*yama_scope);
  if (*yama_scope == 0) {
    plan.why = scope + ": siblings may read each other's memory, nothing to declare";
  } else if (*yama_scope >= 2) {
    plan.why = scope +
               ": only CAP_SYS_PTRACE (2) or nobody (3) may read another process; "
               "cross-memory attach (single copy) stays off";
  } else if (!cross_memory) {
    plan.why = scope + ": SPARK_SHM_CMA=off, no tracer declared";
  } else if (!declare_parent) {
    plan.why = scope +
               ": SPARK_SHM_PTRACER=off, no tracer declared: sibling ranks may not "
               "read each other (no single copy)";
  } else if (parent_pid <= 1) {
    plan.why = scope + ": the rank's parent is pid " + std::to_string(parent_pid) +
               " (init, a container's first process, or the launcher is gone): declaring it "
               "would let every process of the pid namespace read this rank, so no tracer is "
               "declared (no single copy); start the ranks under sparkrun or srun";
  } else {
    plan.declare = true;
    plan.tracer = parent_pid;
    plan.why = scope + ": declared the parent (pid " + std::to_string(parent_pid) +
               ") as ptracer, so the job's ranks (its descendants) may read this rank's "
               "memory; SPARK_SHM_PTRACER=off keeps the kernel's rule";
  }
  return plan;
}

std::optional<int> read_yama_scope() {
  std::ifstream in("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  if (!(in >> v) || v < 0) return std::nullopt;
  return v;
}

PtracerPlan declare_ptracer_for_siblings(int rank, bool cross_memory, bool declare_parent) {
  PtracerPlan plan = plan_ptracer(read_yama_scope(), cross_memory, declare_parent, ::getppid());
  if (plan.declare &&
      ::prctl(PR_SET_PTRACER, static_cast<unsigned long>(plan.tracer), 0, 0, 0) != 0) {
    plan.why = "prctl(PR_SET_PTRACER, " + std::to_string(plan.tracer) +
               ") failed: " + std::strerror(errno) + "; sibling ranks may not read this rank";
    plan.declare = false;
  }
  if (!plan.why.empty() && log::enabled(log::Level::info, "shm"))
    log::line("shm", "rank " + std::to_string(rank) + ": " + plan.why);
  return plan;
}

}  // namespace spark::transport
